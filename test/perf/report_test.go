package main

import (
	"regexp"
	"strings"
	"testing"
)

func tier(ingresses int, phases ...Phase) *Results {
	return &Results{Ingresses: ingresses, Endpoints: 2 * ingresses, Phases: phases,
		CeilingSeconds: 80, CeilingAfterSeconds: 88, RatioToMeanCeiling: 1.05, CeilingWrites: 30000, ConvergenceSeconds: 88, ConvergenceRatio: 1.1,
		OperatorCPUSeconds: 40, OperatorK8sWrites: 32000, K8sWritesPerEndpoint: 3.2,
		RestartIdleSeconds: 6, BytesPerPod: 270, RSSBytes: 90 << 20, PropagationP50Ms: 25, PropagationP99Ms: 50}
}

func ok(names ...string) []Phase {
	var out []Phase
	for _, n := range names {
		out = append(out, Phase{Name: n, State: phaseOK, Seconds: 1})
	}
	return out
}

func rowOf(t *testing.T, out, measure string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), measure) {
			return l
		}
	}
	t.Fatalf("no row %q in:\n%s", measure, out)
	return ""
}

// A phase that failed or was skipped never shows a figure next to its target:
// its rows say why, the target is "not measured", and the exit status says so.
func TestReportCannotMislead(t *testing.T) {
	zero := regexp.MustCompile(`\b0(\.0+)? (MiB|B|ms|s)\b|0\.00×`)
	cases := []struct {
		name     string
		r        *Results
		rows     map[string]string // measure → text its row must hold
		verdicts map[string]string // measure → verdict
		exit     int
	}{
		{
			name: "every phase ok, every target held",
			r:    tier(5000, ok(phaseOrder...)...),
			rows: map[string]string{"convergence / ceiling": "1.10×", "operator RSS": "90.0 MiB"},
			verdicts: map[string]string{"convergence / ceiling": verdictHeld, "operator RSS": verdictHeld,
				"restart until idle": verdictHeld, "heap bytes per cached Pod": verdictHeld},
			exit: 0,
		},
		{
			name: "the memory phase failed: no zero beside the RSS target",
			r: func() *Results {
				r := tier(5000, append(ok(pSetup, pCeiling, pConvergence, pRestart),
					Phase{Name: pMemory, State: phaseFailed, Reason: "the operator was not idle after 25m0s"},
					Phase{Name: pPropagation, State: phaseOK}, Phase{Name: pBrownout, State: phaseOK})...)
				r.RSSBytes, r.BytesPerPod = 0, 0
				return r
			}(),
			rows: map[string]string{"operator RSS": "FAILED: the operator was not idle after 25m0s",
				"heap bytes per cached Pod": "FAILED: the operator was not idle"},
			verdicts: map[string]string{"operator RSS": verdictNotMeasured, "heap bytes per cached Pod": verdictNotMeasured,
				"convergence / ceiling": verdictHeld},
			exit: 2,
		},
		{
			name: "the ceiling failed: the ratio is not measured, convergence is",
			r: func() *Results {
				r := tier(20000, append([]Phase{{Name: pSetup, State: phaseOK},
					{Name: pCeiling, State: phaseFailed, Reason: "stream error: INTERNAL_ERROR"}}, ok(pConvergence)...)...)
				r.CeilingSeconds, r.ConvergenceRatio = 0, 0
				return r
			}(),
			rows:     map[string]string{"convergence / ceiling": "FAILED: stream error", "convergence ": "88.0 s"},
			verdicts: map[string]string{"convergence / ceiling": verdictNotMeasured},
			exit:     2,
		},
		{
			name: "skipped on request: SKIPPED, and the measured targets decide",
			r: func() *Results {
				r := tier(5000, append(ok(pSetup, pCeiling, pConvergence),
					Phase{Name: pRestart, State: phaseSkipped, Reason: "-stop-after convergence"},
					Phase{Name: pMemory, State: phaseSkipped, Reason: "-stop-after convergence"})...)
				r.RSSBytes, r.RestartIdleSeconds = 0, 0
				return r
			}(),
			rows: map[string]string{"operator RSS": "SKIPPED: -stop-after convergence",
				"propagation p50 / p99": "SKIPPED: not run"},
			verdicts: map[string]string{"operator RSS": verdictNotMeasured, "convergence / ceiling": verdictHeld},
			exit:     0,
		},
		{
			name: "a missed target",
			r: func() *Results {
				r := tier(5000, ok(phaseOrder...)...)
				r.ConvergenceRatio, r.RSSBytes = 1.35, 120<<20
				return r
			}(),
			verdicts: map[string]string{"convergence / ceiling": verdictMissed, "operator RSS": verdictMissed},
			exit:     1,
		},
		{
			name: "a ratio just over the target shows the digit that misses it",
			r: func() *Results {
				r := tier(5000, ok(phaseOrder...)...)
				r.ConvergenceRatio = 1.2047
				return r
			}(),
			rows:     map[string]string{"convergence / ceiling": "1.205×"},
			verdicts: map[string]string{"convergence / ceiling": verdictMissed},
			exit:     1,
		},
		{
			name: "size-bound targets: the ratio from 5,000 on, RSS up to 5,000",
			r: func() *Results {
				r := tier(1000, ok(phaseOrder...)...)
				r.ConvergenceRatio = 1.4
				return r
			}(),
			verdicts: map[string]string{"convergence / ceiling": verdictReported, "operator RSS": verdictHeld},
			exit:     0,
		},
		{
			name: "RSS is reported at 20,000",
			r: func() *Results {
				r := tier(20000, ok(phaseOrder...)...)
				r.RSSBytes = 180 << 20
				return r
			}(),
			verdicts: map[string]string{"operator RSS": verdictReported, "convergence / ceiling": verdictHeld},
			exit:     0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			printTier(&b, tc.r)
			out := b.String()
			for m, want := range tc.rows {
				if l := rowOf(t, out, m); !strings.Contains(l, want) {
					t.Errorf("row %q = %q, want it to contain %q", m, l, want)
				}
			}
			got := map[string]string{}
			for _, v := range verdicts(tc.r) {
				got[v.Measure] = v.Verdict
				if v.Verdict == verdictNotMeasured && zero.MatchString(v.Value) {
					t.Errorf("%s: not measured, but its value reads %q", v.Measure, v.Value)
				}
			}
			for m, want := range tc.verdicts {
				if got[m] != want {
					t.Errorf("verdict of %q = %q, want %q", m, got[m], want)
				}
			}
			// No row of an unfinished phase shows a figure.
			for _, rw := range rows {
				if ok, _ := tc.r.phaseOf(rw.phase); !ok {
					if l := rowOf(t, out, rw.measure); zero.MatchString(l) || !strings.Contains(l, "FAILED") && !strings.Contains(l, "SKIPPED") {
						t.Errorf("row of an unfinished phase: %q", l)
					}
				}
			}
			if e := exitStatus([]*Results{tc.r}); e != tc.exit {
				t.Errorf("exit status %d, want %d", e, tc.exit)
			}
		})
	}
}

func TestGrowthTable(t *testing.T) {
	a := tier(1000, ok(phaseOrder...)...)
	b := tier(5000, ok(phaseOrder...)...)
	c := tier(20000, append(ok(pSetup, pCeiling, pConvergence, pRestart), Phase{Name: pMemory, State: phaseFailed, Reason: "x"})...)
	c.ConvergenceSeconds, c.OperatorCPUSeconds, c.K8sWritesPerEndpoint = 400, 200, 3.1
	var out strings.Builder
	printGrowth(&out, []*Results{a, b, c})
	l := rowOf(t, out.String(), "20000")
	for _, want := range []string{"400.0 s", "200.0 s", "5.00", "3.10", "—"} {
		if !strings.Contains(l, want) {
			t.Errorf("growth row %q lacks %q", l, want)
		}
	}
	if exitStatus([]*Results{a, b, c}) != 2 {
		t.Error("a failed phase in any tier fails the run")
	}
}

// The queue depths come from the operator's metrics by queue name (the priority
// queue's per-priority series summed), and the report names the queues that
// held work, deepest first.
// The target's ratio is to the ceiling before the convergence; the ratio to
// the mean with the ceiling after it is printed beside it when that ended ok.
// The row of a ceiling that did not end ok says why, never a zero.
func TestRatioToBothCeilings(t *testing.T) {
	r := tier(5000, ok(phaseOrder...)...)
	r.CeilingSeconds, r.CeilingAfterSeconds, r.ConvergenceSeconds = 60, 80, 84
	r.setRatio()
	if r.ConvergenceRatio != 1.4 || r.RatioToMeanCeiling != 1.2 {
		t.Fatalf("ratio %v, to the mean %v; want 1.4 and 1.2", r.ConvergenceRatio, r.RatioToMeanCeiling)
	}
	var b strings.Builder
	printTier(&b, r)
	if row := rowOf(t, b.String(), "convergence / ceiling"); !strings.Contains(row, "1.40× (1.20× of the mean with the second, 70.0 s)") || !strings.Contains(row, verdictMissed) {
		t.Fatalf("ratio row: %s", row)
	}
	if row := rowOf(t, b.String(), "write ceiling after the convergence"); !strings.Contains(row, "80.0 s (+33 % from the first)") {
		t.Fatalf("second ceiling's row: %s", row)
	}

	r = tier(5000, append(ok(pSetup, pCeiling, pConvergence), Phase{Name: pCeilingAfter, State: phaseFailed, Reason: "context deadline exceeded"})...)
	r.CeilingSeconds, r.CeilingAfterSeconds, r.ConvergenceSeconds, r.RatioToMeanCeiling = 70, 0, 84, 0
	r.setRatio()
	if r.ConvergenceRatio != 1.2 || r.RatioToMeanCeiling != 0 {
		t.Fatalf("after a failed second ceiling: ratio %v, to the mean %v; want 1.2 and none", r.ConvergenceRatio, r.RatioToMeanCeiling)
	}
	b.Reset()
	printTier(&b, r)
	if row := rowOf(t, b.String(), "convergence / ceiling"); !strings.Contains(row, "1.20×") || strings.Contains(row, "mean") || !strings.Contains(row, verdictHeld) {
		t.Fatalf("ratio row: %s", row)
	}
	if row := rowOf(t, b.String(), "write ceiling after the convergence"); !strings.Contains(row, "FAILED: context deadline exceeded") || strings.Contains(row, "0.0 s") {
		t.Fatalf("second ceiling's row: %s", row)
	}
	if exitStatus([]*Results{r}) != 2 {
		t.Fatal("a failed second ceiling is a failed phase: exit 2")
	}

	// The first ceiling failed, the second ended ok: no ratio to it, no "+Inf %".
	r = tier(20000, append([]Phase{{Name: pSetup, State: phaseOK}, {Name: pCeiling, State: phaseFailed, Reason: "stream error"}},
		ok(pConvergence, pCeilingAfter)...)...)
	r.CeilingSeconds, r.CeilingAfterSeconds, r.ConvergenceRatio, r.RatioToMeanCeiling = 0, 300, 0, 0
	r.setRatio()
	b.Reset()
	printTier(&b, r)
	if row := rowOf(t, b.String(), "write ceiling after the convergence"); !strings.Contains(row, "300.0 s (the first did not end ok)") || strings.Contains(row, "Inf") {
		t.Fatalf("second ceiling's row without a first: %s", row)
	}
	if row := rowOf(t, b.String(), "convergence / ceiling"); !strings.Contains(row, "FAILED: stream error") || r.ConvergenceRatio != 0 {
		t.Fatalf("ratio without a first ceiling: %s (%v)", row, r.ConvergenceRatio)
	}

	r = tier(5000, ok(pSetup, pCeiling)...)
	r.ConvergenceRatio, r.RatioToMeanCeiling = 0, 0
	r.Phases = append(r.Phases, Phase{Name: pConvergence, State: phaseFailed, Reason: "x"})
	r.setRatio()
	if r.ConvergenceRatio != 0 || r.RatioToMeanCeiling != 0 {
		t.Fatalf("no convergence, yet a ratio %v", r.ConvergenceRatio)
	}
}

func TestQueueDepths(t *testing.T) {
	m := map[string]float64{
		`workqueue_depth{controller="discovery-ingress",name="discovery-ingress",priority="-100"}`: 4000,
		`workqueue_depth{controller="discovery-ingress",name="discovery-ingress",priority="0"}`:    998,
		`workqueue_depth{controller="sync-endpoint",name="sync-endpoint",priority="0"}`:            2,
		`workqueue_depth{controller="crd-gate",name="crd-gate",priority="0"}`:                      0,
		`workqueue_adds_total{controller="sync-endpoint",name="sync-endpoint"}`:                    500,
	}
	got := queueDepths(m)
	if len(got) != 3 || got["discovery-ingress"] != 4998 || got["sync-endpoint"] != 2 || got["crd-gate"] != 0 {
		t.Fatalf("depths %v", got)
	}
	if s := depthText(got); s != "discovery-ingress 4998, sync-endpoint 2" {
		t.Fatalf("text %q", s)
	}
	if s := depthText(map[string]float64{"sync-endpoint": 0.2}); s != "every queue below 0.5" {
		t.Fatalf("text of empty queues %q", s)
	}
	adds := byQueue(map[string]float64{
		`workqueue_adds_total{controller="discovery-ingress",name="discovery-ingress"}`: 900,
		`workqueue_adds_total{controller="sync-endpoint",name="sync-endpoint"}`:         500,
		`workqueue_adds_total{controller="crd-gate",name="crd-gate"}`:                   1,
		`workqueue_depth{controller="sync-endpoint",name="sync-endpoint",priority="0"}`: 2,
	}, "workqueue_adds_total")
	if len(adds) != 3 || adds["discovery-ingress"] != 900 || adds["sync-endpoint"] != 500 {
		t.Fatalf("adds %v", adds)
	}
	for q := range adds {
		adds[q] /= 500
	}
	if s := addsText(adds); s != "discovery-ingress 1.80, sync-endpoint 1.00" {
		t.Fatalf("adds text %q", s)
	}
}
