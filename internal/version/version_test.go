package version

import "testing"

func TestRelease(t *testing.T) {
	for _, tc := range []struct{ app, describe, want string }{
		{"0.1.0", "v0.1.0", "0.1.0"},
		{"0.1.0", "v0.1.0-dirty", "0.1.0-dev+v0.1.0-dirty"},
		{"0.1.0", "v0.1.0-3-g5565152", "0.1.0-dev+v0.1.0-3-g5565152"},
		{"0.2.0", "5565152", "0.2.0-dev+5565152"},
		{"0.2.0", "5565152-dirty", "0.2.0-dev+5565152-dirty"},
		{"0.2.0", "feature/x_y", "0.2.0-dev+feature.x.y"},
		{"0.2.0", "", "0.2.0-dev+unknown"},
	} {
		if got := Release(tc.app, tc.describe); got != tc.want {
			t.Errorf("Release(%q, %q) = %q, want %q", tc.app, tc.describe, got, tc.want)
		}
	}
}
