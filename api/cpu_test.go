package api

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestVCPU: a request's cpu may be a number or a decimal string (seeds 000 and 002 write "2.0" and
// "0.5"); an answer always writes the string, with at least one decimal.
func TestVCPU(t *testing.T) {
	for _, c := range []struct {
		in   string
		want VCPU
		out  string
	}{
		{`"2.0"`, 2, `"2.0"`},
		{`"0.5"`, 0.5, `"0.5"`},
		{`"2"`, 2, `"2.0"`},
		{`"1.25"`, 1.25, `"1.25"`},
		{`2`, 2, `"2.0"`},
		{`0.25`, 0.25, `"0.25"`},
		{`8.0`, 8, `"8.0"`},
	} {
		var v VCPU
		if err := json.Unmarshal([]byte(c.in), &v); err != nil || v != c.want {
			t.Errorf("%s: %v, %v; want %v", c.in, v, err, c.want)
			continue
		}
		if b, err := json.Marshal(v); err != nil || string(b) != c.out {
			t.Errorf("%s: marshals to %s, %v; want %s", c.in, b, err, c.out)
		}
	}
	for _, bad := range []string{`"two"`, `""`, `"1e3"`, `"-1"`, `"0x10"`, `"Inf"`, `"NaN"`, `"1."`, `".5"`, `" 1"`, `true`, `[1]`, `{}`} {
		var r Resources
		err := json.Unmarshal([]byte(`{"cpu":`+bad+`}`), &r)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || te.Field != "cpu" {
			t.Errorf("%s: %v, want a type error at cpu", bad, err)
		}
	}
	// The seed's resources, as written, in and out.
	var r Resources
	if err := json.Unmarshal([]byte(`{"cpu": "2.0", "memoryMb": 4096, "diskMb": 10240, "gpuEnabled": false}`), &r); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(Resources{CPU: r.CPU, MemoryMB: r.MemoryMB, DiskMB: r.DiskMB})
	if string(b) != `{"cpu":"2.0","memoryMb":4096,"diskMb":10240}` {
		t.Errorf("seed resources answer as %s", b)
	}
}
