package monitoring

import (
	"errors"
	"fmt"
	"testing"

	"github.com/polycrate/polycrate-operator/internal/polycrate"
)

func result(id string, ok bool) polycrate.CheckResult {
	return polycrate.CheckResult{EndpointID: id, Success: ok}
}

func ids(rs []polycrate.CheckResult) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s:%v", r.EndpointID, r.Success))
	}
	return out
}

func TestResultsRule(t *testing.T) {
	r := NewResults(func() int { return 7 }, func() int { return 2 })
	r.Max = 3
	r.Add(result("a", true))
	r.Add(result("b", true))
	r.Add(result("a", false)) // replaces a's unsent success
	r.Add(result("c", true))
	r.Add(result("d", true))
	sum, got, done := r.Take()
	// All four are new (state changes); the oldest three by their newest result: b, a (its second), c.
	if fmt.Sprint(ids(got)) != "[b:true a:false c:true]" {
		t.Fatalf("first report %v", ids(got))
	}
	if sum.TotalChecks != 5 || sum.ChecksSinceLastReport != 5 || sum.FailedChecks != 1 || sum.SuccessfulChecks != 4 ||
		sum.MonitoredEndpoints != 7 || sum.ChecksInQueue != 2 {
		t.Fatalf("summary %+v", sum)
	}
	// The API is away: nothing is lost, the next report carries them again.
	done(errors.New("connection refused"))
	_, again, done := r.Take()
	if len(again) != 3 {
		t.Fatalf("%v", ids(again))
	}
	r.Add(result("b", true)) // a newer result of b while the report is on its way
	done(nil)
	if r.Pending() != 2 { // d, and b's newer result
		t.Fatalf("%d pending", r.Pending())
	}
	sum, got, done = r.Take()
	if sum.ChecksSinceLastReport != 1 || sum.TotalChecks != 6 {
		t.Fatalf("counts after an accepted report %+v", sum)
	}
	// d is new (a change), b is unchanged (sent as success before): d first.
	if fmt.Sprint(ids(got)) != "[d:true b:true]" {
		t.Fatalf("%v", ids(got))
	}
	done(nil)
	// Priorities: a change first, then failures, then the rest by age.
	r.Add(result("c", true))  // unchanged success
	r.Add(result("a", false)) // unchanged failure
	r.Add(result("b", false)) // change: success → failure
	_, got, done = r.Take()
	if fmt.Sprint(ids(got)) != "[b:false a:false c:true]" {
		t.Fatalf("priorities %v", ids(got))
	}
	// A refusal of the results themselves drops them (one bad result must not
	// block every report).
	if dropped := done(&polycrate.APIError{StatusCode: 400}); dropped != 3 || r.Pending() != 0 {
		t.Fatalf("dropped %d, %d pending", dropped, r.Pending())
	}
	// Unassigned endpoints' unsent results go.
	r.Add(result("x", true))
	r.Add(result("y", true))
	r.Retain(map[string]bool{"y": true})
	_, got, _ = r.Take()
	if fmt.Sprint(ids(got)) != "[y:true]" {
		t.Fatalf("%v", ids(got))
	}
}
