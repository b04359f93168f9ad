package patches_test

import (
	"encoding/json"
	"sync"
	"testing"

	"gale/internal/domains/patches"
	"gale/internal/wire/agentproto"
)

// The results of a job's devices recorded at the same time finish the job: the last of them
// sees every other device done, on PostgreSQL's concurrent transactions too.
func TestConcurrentResultsFinishTheJob(t *testing.T) {
	f := newFixture(t)
	const n = 16
	ids := make([]string, n)
	for i := range ids {
		ids[i] = f.device(f.a, "web-"+string(rune('a'+i)), "linux")
	}
	result, _ := json.Marshal(scanResult(false, upd("openssl", "3.0.1-1", "3.0.2-1", true)))
	for round := range 5 {
		var js patches.PatchJobStart
		f.e.Must(202, f.a.Partner, "POST", api+"/patches/scan", map[string]any{"deviceIds": ids}).JSON(t, &js)
		var cmds []string
		rows, err := f.e.App.DB.SQL.Query(`SELECT device_id, command_id FROM patch_job_devices WHERE job_id = $1`, js.ID)
		if err != nil {
			t.Fatal(err)
		}
		devs := map[string]string{}
		for rows.Next() {
			var d, c string
			if err := rows.Scan(&d, &c); err != nil {
				t.Fatal(err)
			}
			devs[c] = d
			cmds = append(cmds, c)
		}
		rows.Close()
		var wg sync.WaitGroup
		for _, c := range cmds {
			wg.Go(func() {
				if err := f.dev.RecordResult(t.Context(), agentOf(f.a, devs[c]), agentproto.CommandResult{CommandID: c,
					Status: agentproto.ResultCompleted, Result: result}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		var j patches.PatchJobDetail
		f.e.Must(200, f.a.Partner, "GET", api+"/patches/jobs/"+js.ID, nil).JSON(t, &j)
		if j.Status != patches.JobCompleted || j.Totals.Completed != n {
			t.Fatalf("round %d: job %s with %+v", round, j.Status, j.Totals)
		}
	}
}
