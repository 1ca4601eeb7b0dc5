package operatorconfig

import "testing"

func TestLogLevel(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want int
	}{{nil, 0}, {1.0, 1}, {2.0, 2}, {3.0, 3}, {"2", 2}, {0.0, 0}, {4.0, 0}, {1.5, 0}, {"debug", 0}, {[]any{1}, 0}} {
		if got := logLevel(tc.in); got != tc.want {
			t.Errorf("logLevel(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestIgnoreList(t *testing.T) {
	got := ignoreList([]any{"b", "a", ""}, nil, []any{"a", 3, "c"}, "not-a-list")
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("ignoreList = %v", got)
	}
}
