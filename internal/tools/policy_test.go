package tools

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
)

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Rate
		err  bool
	}{
		{"10/60s", Rate{10, time.Minute}, false},
		{"100/1h", Rate{100, time.Hour}, false},
		{"5/s", Rate{5, time.Second}, false},
		{" 3/500ms ", Rate{3, 500 * time.Millisecond}, false},
		{"10", Rate{}, true},
		{"0/1s", Rate{}, true},
		{"-1/1s", Rate{}, true},
		{"10/0s", Rate{}, true},
		{"10/1000h", Rate{}, true},
		{"x/1s", Rate{}, true},
	} {
		got, err := ParseRate(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestLimiter(t *testing.T) {
	l := newLimiter(4)
	r := Rate{N: 10, Per: time.Minute}
	t0 := time.Unix(1000, 0)
	one := []limit{{key: "a", rate: r, rule: "tool"}}
	for i := range 10 {
		if ok, _, _ := l.take(one, t0); !ok {
			t.Fatalf("call %d refused", i+1)
		}
	}
	ok, rule, wait := l.take(one, t0)
	if ok || rule != "tool" || wait != 6*time.Second {
		t.Fatalf("11th call: ok %v rule %q wait %v; want refused by tool, 6s until a token", ok, rule, wait)
	}
	if ok, _, _ := l.take(one, t0.Add(6*time.Second)); !ok {
		t.Fatal("a token is back after 6s")
	}
	// Two buckets: both take a token or neither does.
	two := []limit{{key: "b", rate: Rate{N: 5, Per: time.Second}, rule: "b"}, {key: "a", rate: r, rule: "tool"}}
	if ok, rule, _ := l.take(two, t0.Add(6*time.Second)); ok || rule != "tool" {
		t.Fatalf("a's bucket is empty: want refused by tool, got %v %q", ok, rule)
	}
	l.mu.Lock()
	bTokens := l.buckets["b"].tokens
	l.mu.Unlock()
	if bTokens != 5 {
		t.Errorf("a refused call took a token of b: %v left", bTokens)
	}
	// Refilled buckets are forgotten once there are many.
	for _, k := range []string{"c", "d", "e", "f"} {
		l.take([]limit{{key: k, rate: Rate{N: 1, Per: time.Millisecond}}}, t0)
	}
	l.take([]limit{{key: "g", rate: Rate{N: 1, Per: time.Millisecond}}}, t0.Add(time.Hour))
	if n := l.size(); n > 2 {
		t.Errorf("%d buckets kept; the refilled ones should be gone", n)
	}
}

func TestDecide(t *testing.T) {
	mk := func(p api.ToolPolicy) *policy {
		c, err := compilePolicy(p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ps := []*policy{
		mk(api.ToolPolicy{Name: "base", Tenant: "t1", Allow: []string{"run_code", "read_*", "send_email"}}),
		mk(api.ToolPolicy{Name: "bot", Tenant: "t1", AgentID: "bot", Deny: []string{"send_*"}}),
		mk(api.ToolPolicy{Name: "k2", Tenant: "t1", KeyID: "key_2", Allow: []string{"read_*"}}),
		mk(api.ToolPolicy{Name: "other", Tenant: "t2", Deny: []string{"*"}}),
	}
	for _, c := range []struct {
		caller Caller
		tool   string
		ok     bool
		rule   string
	}{
		{Caller{Tenant: "t1", KeyID: "key_1"}, "run_code", true, "policy base: allow run_code"},
		{Caller{Tenant: "t1", KeyID: "key_1"}, "read_file", true, "policy base: allow read_*"},
		{Caller{Tenant: "t1", KeyID: "key_1"}, "delete_file", false, "policy base: not in allow"},
		{Caller{Tenant: "t1", KeyID: "key_1", AgentID: "bot"}, "send_email", false, "policy bot: deny send_*"},
		{Caller{Tenant: "t1", KeyID: "key_1", AgentID: "other"}, "send_email", true, "policy base"},
		{Caller{Tenant: "t1", KeyID: "key_2"}, "run_code", false, "policy k2: not in allow"},
		{Caller{Tenant: "t1", KeyID: "key_2"}, "read_file", true, "policy k2: allow read_*"},
		{Caller{Tenant: "t3", KeyID: "key_3"}, "anything", true, "no allow list applies"},
		{Caller{Tenant: "t2", KeyID: "key_4"}, "run_code", false, "policy other: deny *"},
	} {
		ok, rule := decide(ps, c.caller, c.tool)
		if ok != c.ok || !strings.Contains(rule, c.rule) {
			t.Errorf("%+v calls %s: %v %q; want %v %q", c.caller, c.tool, ok, rule, c.ok, c.rule)
		}
	}
	if _, err := compilePolicy(api.ToolPolicy{Name: "x", Allow: []string{"a/b"}}); err == nil {
		t.Error("a pattern with '/' is refused")
	}
	if _, err := compilePolicy(api.ToolPolicy{Name: "x", RateLimits: []api.ToolRateLimit{{Tools: "*", Limit: "often"}}}); err == nil {
		t.Error("a bad rate is refused")
	}
}
