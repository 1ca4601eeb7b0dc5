package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Phase states. A measure whose phase did not end "ok" is never printed as a
// number: its row says FAILED or SKIPPED with the reason.
const (
	phaseOK      = "ok"
	phaseFailed  = "FAILED"
	phaseSkipped = "SKIPPED"
)

// The phases of one tier, in order.
const (
	pSetup       = "setup"
	pCeiling     = "ceiling"
	pConvergence = "convergence"
	// pCeilingAfter is the write ceiling again, right after the convergence
	// (the operator stopped): reported beside the ratio.
	pCeilingAfter = "ceiling-after"
	pRestart      = "restart"
	pMemory       = "memory"
	pPropagation  = "propagation"
	pBrownout     = "brownout"
)

var phaseOrder = []string{pSetup, pCeiling, pConvergence, pCeilingAfter, pRestart, pMemory, pPropagation, pBrownout}

// Phase is how one phase of a tier ended.
type Phase struct {
	Name    string  `json:"name"`
	State   string  `json:"state"`
	Reason  string  `json:"reason,omitempty"`
	Seconds float64 `json:"seconds"`
}

// Verdicts of a target.
const (
	verdictHeld        = "held"
	verdictMissed      = "MISSED"
	verdictNotMeasured = "not measured"
	verdictReported    = "reported"
)

// row is one line of a tier's table: a measure, the phase that measures it, its
// value, and, if it has one, its target.
type row struct {
	measure string
	phase   string
	value   func(*Results) string
	// target is the printed target ("≤ 1.2×"); empty for a figure without one.
	target string
	// applies says whether the target applies at this tier (a target may hold
	// from a size on, e.g. RSS is a target at 5,000 and reported at 20,000).
	applies func(*Results) bool
	held    func(*Results) bool
}

func always(*Results) bool { return true }

// Targets (issue 24).
const (
	targetRatio          = 1.2
	targetRatioFrom      = 5000 // convergence / ceiling is a target from this size on (below, start-up costs weigh more)
	targetIdleSeconds    = 10.0
	targetBytesPerPod    = 300.0
	targetRSSMiB         = 100.0
	targetRSSUpTo        = 5000 // RSS is a target up to this size, reported above
	targetPropagationP99 = 100.0
)

// ratioText prints a ratio with two decimals, or three where two would round
// it onto the target (1.205× is missed; "1.20×" beside MISSED reads wrong).
func ratioText(x float64) string {
	if t := fmt.Sprintf("%.2f", x); t != fmt.Sprintf("%.2f", targetRatio) || x == targetRatio {
		return t + "×"
	}
	return fmt.Sprintf("%.3f×", x)
}

var rows = []row{
	{measure: "Ingresses / Endpoints", phase: pSetup, value: func(r *Results) string { return fmt.Sprintf("%d / %d", r.Ingresses, r.Endpoints) }},
	{measure: "write ceiling (bare client)", phase: pCeiling, value: func(r *Results) string {
		return fmt.Sprintf("%.1f s (%d writes)", r.CeilingSeconds, r.CeilingWrites)
	}},
	{measure: "write ceiling after the convergence", phase: pCeilingAfter, value: func(r *Results) string {
		if ok, _ := r.phaseOf(pCeiling); !ok || r.CeilingSeconds <= 0 {
			return fmt.Sprintf("%.1f s (the first did not end ok)", r.CeilingAfterSeconds)
		}
		return fmt.Sprintf("%.1f s (%+.0f %% from the first)", r.CeilingAfterSeconds, 100*(r.CeilingAfterSeconds/r.CeilingSeconds-1))
	}},
	{measure: "convergence", phase: pConvergence, value: func(r *Results) string { return fmt.Sprintf("%.1f s", r.ConvergenceSeconds) }},
	{measure: "from the start until idle", phase: pConvergence, value: func(r *Results) string { return fmt.Sprintf("%.1f s", r.ConvergenceIdleSeconds) }},
	{measure: "control-plane CPU: ceiling / convergence", phase: pConvergence + "+" + pCeiling, value: func(r *Results) string {
		return fmt.Sprintf("%.1f s / %.1f s", r.CeilingServerCPU, r.ConvergenceServerCPU)
	}},
	{measure: "operator CPU until idle", phase: pConvergence, value: func(r *Results) string { return fmt.Sprintf("%.1f s", r.OperatorCPUSeconds) }},
	{measure: "operator's Kubernetes writes until idle", phase: pConvergence, value: func(r *Results) string {
		return fmt.Sprintf("%d (%.2f per Endpoint)", r.OperatorK8sWrites, r.K8sWritesPerEndpoint)
	}},
	{measure: "work-queue adds until idle, per Endpoint", phase: pConvergence, value: func(r *Results) string {
		if by := addsText(r.QueueAddsPerEndpoint); by != "" {
			return fmt.Sprintf("%.2f (%s)", r.ReconcilesPerEndpoint, by)
		}
		return fmt.Sprintf("%.2f", r.ReconcilesPerEndpoint)
	}},
	{measure: "mean work-queue depth during convergence", phase: pConvergence, value: func(r *Results) string { return depthText(r.ConvergenceQueueDepth) }},
	{measure: "convergence / ceiling", phase: pConvergence + "+" + pCeiling,
		value:   ratioRow,
		target:  fmt.Sprintf("≤ %.1f× (from %d Ingresses)", targetRatio, targetRatioFrom),
		applies: func(r *Results) bool { return r.Ingresses >= targetRatioFrom },
		held:    func(r *Results) bool { return r.ConvergenceRatio <= targetRatio }},
	{measure: "API writes after a restart (window)", phase: pRestart, value: func(r *Results) string { return strconv.Itoa(r.RestartAPIWrites) },
		target: "0", applies: always, held: func(r *Results) bool { return r.RestartAPIWrites == 0 }},
	{measure: "agent health writes in that window", phase: pRestart, value: func(r *Results) string { return strconv.Itoa(r.RestartAgentWrites) }},
	{measure: "Kubernetes writes after a restart", phase: pRestart, value: func(r *Results) string { return strconv.Itoa(r.RestartK8sWrites) },
		target: "0", applies: always, held: func(r *Results) bool { return r.RestartK8sWrites == 0 }},
	{measure: "restart until ready (stores synced)", phase: pRestart, value: func(r *Results) string { return fmt.Sprintf("%.1f s", r.RestartReadySeconds) }},
	{measure: "restart until idle", phase: pRestart, value: func(r *Results) string { return fmt.Sprintf("%.1f s", r.RestartIdleSeconds) },
		target: fmt.Sprintf("≤ %.0f s", targetIdleSeconds), applies: always, held: func(r *Results) bool { return r.RestartIdleSeconds <= targetIdleSeconds }},
	{measure: "heap for the annotated Pods and K8sApps", phase: pMemory, value: func(r *Results) string {
		return fmt.Sprintf("%.1f MiB (%d Pods, created first)", r.HeapAppsBytes/(1<<20), r.AppPods)
	}},
	{measure: "heap bytes per cached Pod", phase: pMemory, value: func(r *Results) string {
		return fmt.Sprintf("%.0f B (the %d Pods after them)", r.BytesPerPod, r.Pods-r.AppPods)
	},
		target: fmt.Sprintf("≤ %.0f B", targetBytesPerPod), applies: always, held: func(r *Results) bool { return r.BytesPerPod <= targetBytesPerPod }},
	{measure: "heap bytes per unrelated Secret", phase: pMemory, value: func(r *Results) string {
		return fmt.Sprintf("%.0f B (%d Secrets)", r.BytesPerSecret, r.Secrets)
	}},
	{measure: "operator RSS", phase: pMemory, value: func(r *Results) string {
		return fmt.Sprintf("%.1f MiB (anon %.0f, file %.0f)", r.RSSBytes/(1<<20), r.RSSAnonBytes/(1<<20), r.RSSFileBytes/(1<<20))
	},
		target:  fmt.Sprintf("≤ %.0f MiB (up to %d Ingresses)", targetRSSMiB, targetRSSUpTo),
		applies: func(r *Results) bool { return r.Ingresses <= targetRSSUpTo },
		held:    func(r *Results) bool { return r.RSSBytes <= targetRSSMiB*(1<<20) }},
	{measure: "operator peak RSS (VmHWM)", phase: pMemory, value: func(r *Results) string {
		return fmt.Sprintf("%.1f MiB (the RSS above settled at rest in %.0f s)", r.RSSPeakBytes/(1<<20), r.RSSSettleSeconds)
	}},
	{measure: "propagation p50 / p99", phase: pPropagation, value: func(r *Results) string {
		return fmt.Sprintf("%.0f / %.0f ms", r.PropagationP50Ms, r.PropagationP99Ms)
	},
		target: fmt.Sprintf("p99 < %.0f ms", targetPropagationP99), applies: always,
		held: func(r *Results) bool { return r.PropagationP99Ms < targetPropagationP99 }},
	{measure: "brownout: recovery to convergence", phase: pBrownout, value: func(r *Results) string {
		return fmt.Sprintf("%.1f s after %.0f s", r.BrownoutRecoverySeconds, r.BrownoutSeconds)
	}},
	{measure: "brownout: duplicate API objects", phase: pBrownout, value: func(r *Results) string { return strconv.Itoa(r.BrownoutDuplicates) },
		target: "0", applies: always, held: func(r *Results) bool { return r.BrownoutDuplicates == 0 }},
	{measure: "brownout: extra write calls", phase: pBrownout, value: func(r *Results) string { return strconv.Itoa(r.BrownoutExtraWriteCalls) }},
}

// ratioRow is the convergence's ratio to the ceiling before it, and, when the
// ceiling after it ended ok, its ratio to the mean of the two beside it.
func ratioRow(r *Results) string {
	if ok, _ := r.phaseOf(pCeilingAfter); ok && r.RatioToMeanCeiling > 0 {
		return fmt.Sprintf("%s (%s of the mean with the second, %.1f s)", ratioText(r.ConvergenceRatio), ratioText(r.RatioToMeanCeiling),
			(r.CeilingSeconds+r.CeilingAfterSeconds)/2)
	}
	return ratioText(r.ConvergenceRatio)
}

// setRatio takes the convergence's ratio to the ceiling measured before it —
// the target's — and, once the ceiling after it ended ok, the ratio to the
// mean of the two.
func (r *Results) setRatio() {
	if ok, _ := r.phaseOf(pConvergence + "+" + pCeiling); !ok || r.CeilingSeconds <= 0 || r.ConvergenceSeconds <= 0 {
		return
	}
	r.ConvergenceRatio = r.ConvergenceSeconds / r.CeilingSeconds
	if ok, _ := r.phaseOf(pCeilingAfter); ok && r.CeilingAfterSeconds > 0 {
		r.RatioToMeanCeiling = r.ConvergenceSeconds / ((r.CeilingSeconds + r.CeilingAfterSeconds) / 2)
	}
}

// phaseOf says whether every phase a row needs ended ok, and if not, what to
// print instead of its value.
func (r *Results) phaseOf(names string) (ok bool, instead string) {
	for _, n := range strings.Split(names, "+") {
		p := r.phase(n)
		switch {
		case p == nil:
			return false, phaseSkipped + ": not run"
		case p.State != phaseOK:
			return false, p.State + ": " + p.Reason
		}
	}
	return true, ""
}

func (r *Results) phase(name string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}

// Verdict is one target's outcome in one tier.
type Verdict struct {
	Ingresses int    `json:"ingresses"`
	Measure   string `json:"measure"`
	Value     string `json:"value"`
	Target    string `json:"target"`
	Verdict   string `json:"verdict"`
}

// verdicts evaluates every target of a tier.
func verdicts(r *Results) []Verdict {
	var out []Verdict
	for _, rw := range rows {
		if rw.target == "" {
			continue
		}
		v := Verdict{Ingresses: r.Ingresses, Measure: rw.measure, Target: rw.target}
		ok, instead := r.phaseOf(rw.phase)
		switch {
		case !ok:
			v.Value, v.Verdict = instead, verdictNotMeasured
		case !rw.applies(r):
			v.Value, v.Verdict = rw.value(r), verdictReported
		case rw.held(r):
			v.Value, v.Verdict = rw.value(r), verdictHeld
		default:
			v.Value, v.Verdict = rw.value(r), verdictMissed
		}
		out = append(out, v)
	}
	return out
}

// Exit statuses: every measured target held and no phase failed (0), a target
// missed (1), a phase failed (2; its targets are not measured). A phase skipped
// on request (-stop-after) is not a failure.
func exitStatus(tiers []*Results) int {
	code := 0
	for _, r := range tiers {
		for _, p := range r.Phases {
			if p.State == phaseFailed {
				return 2
			}
		}
		for _, v := range verdicts(r) {
			if v.Verdict == verdictMissed {
				code = 1
			}
		}
	}
	return code
}

func printTier(w io.Writer, r *Results) {
	line := func(k, v, target, verdict string) {
		fmt.Fprintf(w, "  %-42s %-40s %-34s %s\n", k, v, target, verdict)
	}
	fmt.Fprintf(w, "\nScale harness — %d Ingresses — %s\n", r.Ingresses, r.Machine)
	line("measure", "value", "target", "verdict")
	for _, rw := range rows {
		ok, instead := r.phaseOf(rw.phase)
		value, verdict := instead, ""
		if ok {
			value = rw.value(r)
		}
		if rw.target != "" {
			switch {
			case !ok:
				verdict = verdictNotMeasured
			case !rw.applies(r):
				verdict = verdictReported
			case rw.held(r):
				verdict = verdictHeld
			default:
				verdict = verdictMissed
			}
		}
		line(rw.measure, value, rw.target, verdict)
	}
	fmt.Fprintf(w, "  phases:")
	for _, p := range r.Phases {
		if p.State == phaseOK {
			fmt.Fprintf(w, " %s %.0fs;", p.Name, p.Seconds)
		} else {
			fmt.Fprintf(w, " %s %s;", p.Name, p.State)
		}
	}
	fmt.Fprintln(w)
}

// printGrowth prints how the cost grows with size, one line per tier: a
// regression in the per-object cost shows even when the machine is noisy.
func printGrowth(w io.Writer, tiers []*Results) {
	if len(tiers) < 2 {
		return
	}
	fmt.Fprintf(w, "\nHow cost grows with size\n")
	fmt.Fprintf(w, "  %-10s %-10s %-12s %-13s %-8s %-14s %-22s %-24s %-20s %s\n", "Ingresses", "Endpoints", "ceiling",
		"convergence", "ratio", "operator CPU", "CPU ms per Endpoint", "K8s writes per Endpoint", "queue adds per Endpoint", "RSS")
	for _, r := range tiers {
		cell := func(phases string, f func() string) string {
			if ok, _ := r.phaseOf(phases); !ok {
				return "—"
			}
			return f()
		}
		fmt.Fprintf(w, "  %-10d %-10d %-12s %-13s %-8s %-14s %-22s %-24s %-20s %s\n", r.Ingresses, r.Endpoints,
			cell(pCeiling, func() string { return fmt.Sprintf("%.1f s", r.CeilingSeconds) }),
			cell(pConvergence, func() string { return fmt.Sprintf("%.1f s", r.ConvergenceSeconds) }),
			cell(pConvergence+"+"+pCeiling, func() string { return ratioText(r.ConvergenceRatio) }),
			cell(pConvergence, func() string { return fmt.Sprintf("%.1f s", r.OperatorCPUSeconds) }),
			cell(pConvergence, func() string { return fmt.Sprintf("%.2f", r.OperatorCPUSeconds*1000/float64(r.Endpoints)) }),
			cell(pConvergence, func() string { return fmt.Sprintf("%.2f", r.K8sWritesPerEndpoint) }),
			cell(pConvergence, func() string { return fmt.Sprintf("%.2f", r.ReconcilesPerEndpoint) }),
			cell(pMemory, func() string { return fmt.Sprintf("%.1f MiB", r.RSSBytes/(1<<20)) }))
	}
}

// printSummary prints every target's verdict across tiers and what the exit
// status will say.
func printSummary(w io.Writer, tiers []*Results) {
	fmt.Fprintf(w, "\nTargets\n")
	for _, r := range tiers {
		for _, v := range verdicts(r) {
			fmt.Fprintf(w, "  %-8d %-40s %-40s %-34s %s\n", v.Ingresses, v.Measure, v.Value, v.Target, v.Verdict)
		}
	}
	switch exitStatus(tiers) {
	case 0:
		fmt.Fprintln(w, "every measured target held")
	case 1:
		fmt.Fprintln(w, "a target was MISSED")
	default:
		fmt.Fprintln(w, "a phase FAILED: its targets are not measured")
	}
}

// addsText names the queues that took adds, most first ("discovery-ingress
// 2.00, sync-endpoint 1.00"); the others are left out.
func addsText(a map[string]float64) string { return byValue(a, 0.005, "%s %.2f") }

// depthText names the queues that held work during a convergence, deepest
// first ("discovery-ingress 12, sync-endpoint 3"); the others are left out.
func depthText(d map[string]float64) string {
	if t := byValue(d, 0.5, "%s %.0f"); t != "" {
		return t
	}
	return "every queue below 0.5"
}

// byValue prints the queues whose value is at least min, largest first (then
// by name), each in format (name, value), comma-separated.
func byValue(m map[string]float64, min float64, format string) string {
	names := make([]string, 0, len(m))
	for n, v := range m {
		if v >= min {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		return m[names[i]] > m[names[j]] || m[names[i]] == m[names[j]] && names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf(format, n, m[n])
	}
	return strings.Join(parts, ", ")
}
