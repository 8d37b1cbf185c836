package main

import "testing"

func TestShellJoin(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"/bin/true"}, "/bin/true"},
		{[]string{"/usr/bin/python3", "-c", "print(1)"}, "/usr/bin/python3 -c 'print(1)'"},
		{[]string{"echo", "it's"}, `echo 'it'\''s'`},
		{[]string{"x", ""}, "x ''"},
	}
	for _, tc := range tests {
		if got := shellJoin(tc.argv); got != tc.want {
			t.Errorf("shellJoin(%q) = %s, want %s", tc.argv, got, tc.want)
		}
	}
}
