package scripts

import (
	"encoding/json"
	"testing"
)

// Bundles are untrusted: any input is an error or entries, each of which is either refused
// or a definition that passes validation; nothing panics.
func FuzzBundle(f *testing.F) {
	f.Add([]byte(`{"bundleVersion":1,"scripts":[{"name":"a","osTypes":["linux"],"language":"sh","content":"id"}]}`))
	f.Add([]byte(`{"bundleVersion":1,"scripts":[{"name":"","osTypes":"linux"},7,null,{"parameters":[{"name":"X","type":"select"}]}]}`))
	f.Add([]byte(`{"bundleVersion":2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		entries, err := parseBundle(raw)
		if err != nil {
			return
		}
		if len(entries) > MaxBundleScripts {
			t.Fatalf("%d entries passed the limit", len(entries))
		}
		for _, e := range entries {
			_, d, err := decodeEntry(e)
			if err != nil {
				continue
			}
			in := ScriptInput{Name: d.Name, Description: d.Description, OSTypes: d.OSTypes, Language: d.Language, Content: d.Content,
				Parameters: d.Parameters, TimeoutSeconds: d.Timeout, RunAs: d.RunAs, ExitCodeSeverityMapping: d.Mapping}
			if _, err := validateDefinition(in); err != nil {
				t.Fatalf("an accepted entry does not validate again: %v", err)
			}
			if _, err := json.Marshal(d.Parameters); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Entries are held to the rules of scripts created through the API, control characters
// included (the input policy does not walk the bundle), and lose what they may not say.
func TestBundleEntriesAreValidatedLikeScripts(t *testing.T) {
	for raw, wantErr := range map[string]bool{
		`{"name":"ok","osTypes":["linux"],"language":"bash","content":"echo a\r\n\techo b","isSystem":true,"orgId":"x"}`: false,
		`{"name":"a\u001b[31m","osTypes":["linux"],"language":"bash","content":"id"}`:                                    true,
		`{"name":"a","osTypes":["linux"],"language":"bash","content":"printf '\u001b'"}`:                                 true,
		`{"name":"a","osTypes":["linux"],"language":"bash","content":"id","tags":["x\ty"]}`:                              true,
		`{"name":"a","osTypes":["linux"],"language":"cmd","content":"dir"}`:                                              true,
		`{"name":"a","osTypes":["linux"],"language":"bash","content":"id","exitCodeSeverityMapping":{"default":null}}`:   true,
	} {
		_, _, err := decodeEntry(json.RawMessage(raw))
		if (err != nil) != wantErr {
			t.Errorf("%s: error %v, want error %v", raw, err, wantErr)
		}
	}
}
