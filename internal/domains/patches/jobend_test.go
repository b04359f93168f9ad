package patches_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"gale/internal/domains/patches"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// jobEnd is what a job's patch.job_completed events say: how many there are and the last one's
// data.
type jobEnd struct {
	Count  int
	Status string                 `json:"status"`
	Totals patches.PatchJobTotals `json:"totals"`
}

func (f fixture) jobEnd(jobID string) jobEnd {
	f.e.T.Helper()
	var end jobEnd
	rows, err := f.e.App.DB.SQL.Query(`SELECT data FROM events WHERE type = $1 AND resource_id = $2`, patches.EventJobCompleted, jobID)
	if err != nil {
		f.e.T.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			f.e.T.Fatal(err)
		}
		if err := json.Unmarshal([]byte(data), &end); err != nil {
			f.e.T.Fatal(err)
		}
		end.Count++
	}
	if err := rows.Err(); err != nil {
		f.e.T.Fatal(err)
	}
	return end
}

// checkEnded fails the test unless the job ended once, as status, with completed and failed
// devices, and its one event says so.
func (f fixture) checkEnded(c apptest.Caller, jobID, status string, completed, failed int) {
	f.e.T.Helper()
	j := f.job(c, jobID)
	if j.Status != status || j.CompletedAt == nil || j.Totals.Devices != completed+failed || j.Totals.Completed != completed ||
		j.Totals.Failed != failed || j.Totals.Queued+j.Totals.Running+j.Totals.Waiting != 0 {
		f.e.T.Fatalf("job %s with %+v, want %s with %d completed and %d failed", j.Status, j.Totals, status, completed, failed)
	}
	end := f.jobEnd(jobID)
	if end.Count != 1 || end.Status != status || end.Totals.Completed != completed || end.Totals.Failed != failed ||
		end.Totals.Devices != completed+failed {
		f.e.T.Fatalf("job_completed events: %+v, want one saying %s with %d completed and %d failed", end, status, completed, failed)
	}
}

// The last results of a job recorded at the same time, each sent twice, with sweeps running
// beside them, end the job exactly once, with every device counted once.
func TestLastResultsAtOnceEndTheJobOnce(t *testing.T) {
	f := newFixture(t)
	const n, first = 24, 8
	ids := make([]string, n)
	for i := range ids {
		ids[i] = f.device(f.a, fmt.Sprintf("web-%02d", i), "linux")
	}
	ok, _ := json.Marshal(scanResult(false, upd("openssl", "3.0.1-1", "3.0.2-1", true)))
	record := func(dev, cmd string, fail bool) {
		r := agentproto.CommandResult{CommandID: cmd, Status: agentproto.ResultCompleted, Result: ok}
		if fail {
			r = agentproto.CommandResult{CommandID: cmd, Status: agentproto.ResultFailed, Error: "apt is locked"}
		}
		if err := f.dev.RecordResult(context.Background(), agentOf(f.a, dev), r); err != nil {
			t.Error(err)
		}
	}
	for round, allFail := range []bool{false, false, true} {
		js, cmds := f.scan(f.a.Partner, ids...)
		fails := func(i int) bool { return allFail || i%3 == 0 }
		for i := range first {
			record(ids[i], cmds[ids[i]], fails(i))
		}
		if j := f.job(f.a.Partner, js.ID); j.Status != patches.JobRunning {
			t.Fatalf("round %d: the job ended with %d devices left: %+v", round, n-first, j.Totals)
		}
		var wg sync.WaitGroup
		for i := first; i < n; i++ {
			for range 2 {
				wg.Go(func() { record(ids[i], cmds[ids[i]], fails(i)) })
			}
		}
		for range 2 {
			wg.Go(func() {
				if err := f.s.SweepJobs(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		failed := 0
		for i := range n {
			if fails(i) {
				failed++
			}
		}
		status := patches.JobCompleted
		if allFail {
			status = patches.JobFailed
		}
		f.checkEnded(f.a.Partner, js.ID, status, n-failed, failed)
	}
}

// Results that come after a device's work ended (a repeated result, or one for a command
// cancelled meanwhile) change neither the job nor its counts, and the job ends once.
func TestResultsAfterTheWorkEndedChangeNothing(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	web, db := f.device(f.a, "web-01", "linux"), f.device(f.a, "db-01", "linux")
	js, cmds := f.scan(c, web, db)
	f.e.Must(200, c, "POST", api+"/devices/"+db+"/commands/"+cmds[db]+"/cancel", nil)
	res := scanResult(false, upd("openssl", "3.0.1-1", "3.0.2-1", true))
	f.result(f.a, web, cmds[web], agentproto.ResultCompleted, res)
	f.result(f.a, web, cmds[web], agentproto.ResultCompleted, res)
	if j := f.job(c, js.ID); j.Status != patches.JobRunning || j.Totals.Completed != 1 || j.Totals.Devices != 2 {
		t.Fatalf("job before the sweep: %s %+v", j.Status, j.Totals)
	}
	// The sweep fails the cancelled command's work, which was the last: the job ends.
	if err := f.s.SweepJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.checkEnded(c, js.ID, patches.JobCompleted, 1, 1)
	ended := f.job(c, js.ID).CompletedAt
	// The cancelled scan's agent answers late, and web's answers again: nothing changes.
	f.result(f.a, db, cmds[db], agentproto.ResultCompleted, res)
	f.result(f.a, web, cmds[web], agentproto.ResultFailed, res)
	if err := f.s.SweepJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.checkEnded(c, js.ID, patches.JobCompleted, 1, 1)
	if got := f.job(c, js.ID).CompletedAt; !got.Equal(*ended) {
		t.Fatalf("completedAt moved from %v to %v", ended, got)
	}
}

// endWorkByHand ends a job's work on web (completed) and db (failed) as a result's
// transaction would, without finishing the job: as on a node that stopped right after.
func (f fixture) endWorkByHand(jobID, web, db string) {
	f.e.T.Helper()
	for dev, status := range map[string]string{web: patches.JobDeviceCompleted, db: patches.JobDeviceFailed} {
		if _, err := f.e.App.DB.SQL.Exec(`UPDATE patch_job_devices SET status = $1 WHERE job_id = $2 AND device_id = $3`,
			status, jobID, dev); err != nil {
			f.e.T.Fatal(err)
		}
	}
	if j := f.job(f.a.Partner, jobID); j.Status != patches.JobRunning {
		f.e.T.Fatalf("job %s before it was finished", j.Status)
	}
}

// A job whose last work ended on a node that stopped before finishing the job is finished by
// the sweep, once.
func TestTheSweepFinishesJobsLeftWithoutOpenWork(t *testing.T) {
	f := newFixture(t)
	web, db := f.device(f.a, "web-01", "linux"), f.device(f.a, "db-01", "linux")
	js, _ := f.scan(f.a.Partner, web, db)
	f.endWorkByHand(js.ID, web, db)
	for range 2 {
		if err := f.s.SweepJobs(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	f.checkEnded(f.a.Partner, js.ID, patches.JobCompleted, 1, 1)
}

// Several callers finding a job without open work at the same time, and one after them,
// finish it once.
func TestAJobIsFinishedOnceByManyCallers(t *testing.T) {
	f := newFixture(t)
	web, db := f.device(f.a, "web-01", "linux"), f.device(f.a, "db-01", "linux")
	js, _ := f.scan(f.a.Partner, web, db)
	f.endWorkByHand(js.ID, web, db)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := f.s.SettleJobs(context.Background(), []string{js.ID}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := f.s.SettleJobs(context.Background(), []string{js.ID, js.ID}); err != nil {
		t.Fatal(err)
	}
	f.checkEnded(f.a.Partner, js.ID, patches.JobCompleted, 1, 1)
}

// Held work released onto a device that can no longer take it fails; when it was the job's
// last, the job ends.
func TestReleasedWorkThatFailsEndsTheJob(t *testing.T) {
	f := newFixture(t)
	web := f.device(f.a, "web-01", "linux")
	ids := f.seedPatches(f.a, web, upd("openssl", "3.0.1-1", "3.0.2-1", true))
	f.e.Must(200, f.a.Partner, "POST", api+"/patches/"+ids["openssl"]+"/approve", map[string]any{})
	held := true
	f.s.SetHold(func(ctx context.Context, tx *sql.Tx, devs []string) (map[string]bool, error) {
		out := map[string]bool{}
		for _, id := range devs {
			out[id] = held
		}
		return out, nil
	})
	job, err := f.s.Install(partnerCtx(f.a), []string{web}, []string{ids["openssl"]}, patches.InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Totals.Waiting != 1 {
		t.Fatalf("install job %+v", job)
	}
	// The device left Linux meanwhile: it gets no patch_install.
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE devices SET os_type = 'windows' WHERE id = $1`, web); err != nil {
		t.Fatal(err)
	}
	held = false
	if err := f.s.ReleaseWaiting(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.checkEnded(f.a.Partner, job.ID, patches.JobFailed, 0, 1)
}
