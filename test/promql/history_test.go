package promql_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	promrules "github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
)

// A history is what Prometheus would have stored of an operator that went
// through phases (healthy, failing, recovered), built from real scrapes of the
// running operator in each phase. An alert's `for:` is minutes to an hour, a
// test has seconds: each phase is recorded for a few seconds (a scrape a
// second) and then lasts as long as the test says, the operator staying in the
// state it was seen in — every series continues as its real samples ended:
//
//   - a counter (and a histogram's or summary's buckets, sum and count) at the
//     rate of its real samples over the phase's second half;
//   - a gauge in seconds — an instant (…_timestamp_seconds, …_time_seconds) or
//     a duration (workqueue_longest_running_processor_seconds) — along the
//     line of those samples (a health report every few seconds moves its
//     timestamp with the clock, a stuck one keeps it, a hanging reconcile's
//     duration grows with the clock);
//   - any other gauge keeps its last value;
//   - a failed scrape stays failed (only up=0).
//
// A later phase follows on: its instants move by the time the earlier phases
// were stretched, its counters by what they gained meanwhile. Samples are
// stored as a scrape every 30 s (the chart's ServiceMonitor interval) stores
// them, with Prometheus's staleness markers when a series or the whole target
// disappears.

// scrapeInterval is the chart's ServiceMonitor interval; evalInterval
// Prometheus's rule evaluation interval the test assumes (its default is 1m;
// prometheus-operator's 30s).
const (
	scrapeInterval = 30 * time.Second
	evalInterval   = 30 * time.Second
)

// scrapeAt is one scrape of a recording; families is nil when it failed.
type scrapeAt struct {
	at       time.Time
	families map[string]*dto.MetricFamily
}

// phase is a recorded state of the operator and how long it lasts in the history.
type phase struct {
	name    string
	scrapes []scrapeAt
	lasts   time.Duration
}

// record scrapes the operator once a second for d.
func record(name string, d, lasts time.Duration) phase {
	GinkgoHelper()
	p := phase{name: name, lasts: lasts}
	end := time.Now().Add(d)
	for {
		at := time.Now()
		fam, err := tryScrape(2 * time.Second)
		if err != nil {
			fam = nil
		}
		p.scrapes = append(p.scrapes, scrapeAt{at: at, families: fam})
		if !at.Add(time.Second).Before(end) {
			break
		}
		time.Sleep(time.Until(at.Add(time.Second)))
	}
	Expect(p.scrapes[len(p.scrapes)-1].at.Sub(p.scrapes[0].at)).To(BeNumerically("<", lasts), "phase %s lasts longer than its history", name)
	return p
}

// sampleKind says how a series continues past its real samples.
type sampleKind int

const (
	gauge    sampleKind = iota // keeps its last value
	counter                    // grows at its rate
	clock                      // an instant: moves with the history's clock
	duration                   // seconds: continues along its line
)

// flatSample is one series' value in a scrape, with the target labels a
// ServiceMonitor scrape adds (job, namespace).
type flatSample struct {
	key    string
	labels labels.Labels
	v      float64
	kind   sampleKind
}

// flatten turns a scrape into samples as Prometheus stores them.
func flatten(families map[string]*dto.MetricFamily) []flatSample {
	var out []flatSample
	add := func(name string, m *dto.Metric, v float64, kind sampleKind, extra ...string) {
		b := labels.NewBuilder(labels.EmptyLabels())
		for _, l := range m.GetLabel() {
			name := l.GetName()
			if _, clash := scrapeSel[name]; clash {
				name = "exported_" + name // what Prometheus does without honor_labels
			}
			b.Set(name, l.GetValue())
		}
		for k, val := range scrapeSel {
			b.Set(k, val)
		}
		for i := 0; i+1 < len(extra); i += 2 {
			b.Set(extra[i], extra[i+1])
		}
		b.Set(labels.MetricName, name)
		ls := b.Labels()
		out = append(out, flatSample{key: ls.String(), labels: ls, v: v, kind: kind})
	}
	gaugeKind := func(name string) sampleKind {
		switch {
		case strings.HasSuffix(name, "_timestamp_seconds"), strings.HasSuffix(name, "_time_seconds"):
			return clock
		case strings.HasSuffix(name, "_seconds"):
			return duration
		}
		return gauge
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m, m.GetCounter().GetValue(), counter)
			case dto.MetricType_GAUGE:
				add(name, m, m.GetGauge().GetValue(), gaugeKind(name))
			case dto.MetricType_UNTYPED:
				add(name, m, m.GetUntyped().GetValue(), gaugeKind(name))
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", m, float64(b.GetCumulativeCount()), counter, "le", formatFloat(b.GetUpperBound()))
				}
				add(name+"_bucket", m, float64(h.GetSampleCount()), counter, "le", "+Inf")
				add(name+"_sum", m, h.GetSampleSum(), counter)
				add(name+"_count", m, float64(h.GetSampleCount()), counter)
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, m, q.GetValue(), gauge, "quantile", formatFloat(q.GetQuantile()))
				}
				add(name+"_sum", m, s.GetSampleSum(), counter)
				add(name+"_count", m, float64(s.GetSampleCount()), counter)
			}
		}
	}
	return out
}

// span is where a phase lies in the history.
type span struct {
	name       string
	start, end time.Time
}

// history builds the stored series of the phases, one after the other, from
// the first scrape's time on.
func history(phases ...phase) (*memStore, []span) {
	GinkgoHelper()
	st := newMemStore()
	up := labels.FromMap(map[string]string{labels.MetricName: "up", "job": scrapeSel["job"], "namespace": scrapeSel["namespace"]})
	live := map[string]labels.Labels{} // the series of the last stored scrape
	var (
		spans  []span
		simAt  = phases[0].scrapes[0].at // the history's clock
		shift  time.Duration             // history time - real time of the current phase
		offset = map[string]float64{}    // what each counter gained in stretched time
	)
	put := func(t time.Time, samples []flatSample, ok bool) {
		ms := t.UnixMilli()
		seen := map[string]bool{}
		for _, s := range samples {
			st.add(s.labels, ms, s.v)
			live[s.key], seen[s.key] = s.labels, true
		}
		for k, l := range live {
			if !seen[k] {
				st.add(l, ms, math.Float64frombits(value.StaleNaN)) // Prometheus's staleness marker
				delete(live, k)
			}
		}
		st.add(up, ms, map[bool]float64{true: 1, false: 0}[ok])
	}
	for _, p := range phases {
		Expect(p.scrapes).NotTo(BeEmpty(), p.name)
		start := simAt
		shift = start.Sub(p.scrapes[0].at)
		// The real scrapes, moved into the history.
		type point struct{ t, v float64 }
		var (
			last   []flatSample
			lastOK bool
			lastAt time.Time
			series = map[string][]point{}
			half   = p.scrapes[0].at.Add(p.scrapes[len(p.scrapes)-1].at.Sub(p.scrapes[0].at) / 2)
		)
		for _, sc := range p.scrapes {
			at := sc.at.Add(shift)
			var samples []flatSample
			if sc.families != nil {
				samples = flatten(sc.families)
				for i := range samples {
					switch samples[i].kind {
					case counter:
						samples[i].v += offset[samples[i].key]
					case clock:
						if samples[i].v > 0 {
							samples[i].v += shift.Seconds()
						}
					}
					if !sc.at.Before(half) {
						series[samples[i].key] = append(series[samples[i].key], point{t: at.Sub(start).Seconds(), v: samples[i].v})
					}
				}
			}
			put(at, samples, sc.families != nil)
			last, lastOK, lastAt = samples, sc.families != nil, at
		}
		// The state goes on until the phase ends.
		end := start.Add(p.lasts)
		slopes := map[string]float64{}
		for k, pts := range series {
			if len(pts) >= 2 {
				xs, ys := make([]float64, len(pts)), make([]float64, len(pts))
				for i, pt := range pts {
					xs[i], ys[i] = pt.t, pt.v
				}
				slopes[k] = slope(xs, ys)
			}
		}
		for t := lastAt.Add(scrapeInterval); !t.After(end); t = t.Add(scrapeInterval) {
			var samples []flatSample
			if lastOK {
				dt := t.Sub(lastAt).Seconds()
				for _, s := range last {
					switch s.kind {
					case counter:
						s.v += max(slopes[s.key], 0) * dt
					case clock, duration:
						if s.v > 0 {
							s.v = max(s.v+slopes[s.key]*dt, 0)
						}
					}
					samples = append(samples, s)
				}
			}
			put(t, samples, lastOK)
		}
		// What the counters gained, for the next phase.
		if lastOK {
			dt := end.Sub(lastAt).Seconds()
			for _, s := range last {
				if s.kind == counter {
					offset[s.key] += max(slopes[s.key], 0) * dt
				}
			}
		}
		spans = append(spans, span{name: p.name, start: start, end: end})
		simAt = end.Add(scrapeInterval)
	}
	return st, spans
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// AppenderV2 stores what the rules write back (ALERTS, ALERTS_FOR_STATE).
func (m *memStore) AppenderV2(context.Context) storage.AppenderV2 { return &memAppender{m: m} }

type memAppender struct {
	m       *memStore
	pending []flatSample
	ts      []int64
}

func (a *memAppender) Append(_ storage.SeriesRef, ls labels.Labels, _, t int64, v float64, _ *histogram.Histogram,
	_ *histogram.FloatHistogram, _ storage.AppendV2Options) (storage.SeriesRef, error) {
	a.pending = append(a.pending, flatSample{labels: ls, v: v})
	a.ts = append(a.ts, t)
	return 1, nil
}

func (a *memAppender) Commit() error {
	for i, s := range a.pending {
		a.m.add(s.labels, a.ts[i], s.v)
	}
	a.pending, a.ts = nil, nil
	return nil
}

func (a *memAppender) Rollback() error { a.pending, a.ts = nil, nil; return nil }

// alertState is one alert instance's state at one evaluation.
type alertState struct {
	at     time.Time
	state  promrules.AlertState // firing, pending; inactive when not active
	labels labels.Labels
	annots labels.Labels
}

// evaluation is the chart's rule group run over a history as Prometheus runs
// it: Prometheus's rules manager (an alerting rule per alert of the chart,
// `for:` and keep_firing_for honoured), an evaluation every 30 s, and what it
// sends to Alertmanager.
type evaluation struct {
	states map[string][]alertState // alert name → every active instance at every evaluation
	sent   []*promrules.Alert      // to Alertmanager, in order
	times  []time.Time
}

func evaluate(st *memStore, from, to time.Time) *evaluation {
	GinkgoHelper()
	ev := &evaluation{states: map[string][]alertState{}}
	opts := &promrules.ManagerOptions{
		QueryFunc:    promrules.EngineQueryFunc(engine, st),
		AppendableV2: st,
		Queryable:    st,
		Context:      ctx,
		Logger:       promslog.NewNopLogger(),
		Parser:       pql,
		NotifyFunc: func(_ context.Context, _ string, alerts ...*promrules.Alert) {
			for _, a := range alerts {
				c := *a
				ev.sent = append(ev.sent, &c)
			}
		},
	}
	var groups []*promrules.Group
	for _, g := range rules.Groups {
		var rs []promrules.Rule
		for _, r := range g.Rules {
			Expect(r.Alert).NotTo(BeEmpty(), "the chart has alerting rules only")
			expr, err := pql.ParseExpr(r.Expr)
			Expect(err).NotTo(HaveOccurred(), r.Alert)
			ar := promrules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
				labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, promslog.NewNopLogger())
			rs = append(rs, ar)
		}
		groups = append(groups, promrules.NewGroup(promrules.GroupOptions{Name: g.Name, File: "prometheusrule.yaml",
			Interval: evalInterval, Rules: rs, Opts: opts}))
	}
	for t := from; !t.After(to); t = t.Add(evalInterval) {
		ev.times = append(ev.times, t)
		for _, g := range groups {
			g.Eval(ctx, t)
			for _, r := range g.Rules() {
				Expect(r.LastError()).NotTo(HaveOccurred(), "%s at %s", r.Name(), t)
				ar := r.(*promrules.AlertingRule)
				for _, a := range ar.ActiveAlerts() {
					ev.states[ar.Name()] = append(ev.states[ar.Name()], alertState{at: t, state: a.State, labels: a.Labels, annots: a.Annotations})
				}
			}
		}
	}
	return ev
}

// track is one alert instance (the alert's instances whose labels include
// match) over the evaluations: when it went pending, fired, resolved.
type track struct {
	pending, firing, resolved time.Time
	firingLabels, annots      labels.Labels
	states                    []string
}

func (ev *evaluation) track(alert string, match map[string]string) track {
	var tr track
	byTime := map[time.Time]promrules.AlertState{}
	for _, s := range ev.states[alert] {
		ok := true
		for k, v := range match {
			ok = ok && s.labels.Get(k) == v
		}
		if !ok {
			continue
		}
		if cur, seen := byTime[s.at]; !seen || s.state > cur {
			byTime[s.at] = s.state
		}
		if s.state == promrules.StateFiring && tr.firingLabels.IsEmpty() {
			tr.firingLabels, tr.annots = s.labels, s.annots
		}
	}
	prev := promrules.StateInactive
	for _, t := range ev.times {
		st, ok := byTime[t]
		if !ok {
			st = promrules.StateInactive
		}
		if st != prev {
			tr.states = append(tr.states, st.String()+"@"+t.Format("15:04:05"))
			switch {
			case st == promrules.StatePending && tr.pending.IsZero():
				tr.pending = t
			case st == promrules.StateFiring && tr.firing.IsZero():
				tr.firing = t
			case st == promrules.StateInactive && !tr.firing.IsZero() && tr.resolved.IsZero():
				tr.resolved = t
			}
		}
		prev = st
	}
	return tr
}

// sentResolved reports whether Alertmanager was told that the alert instance resolved.
func (ev *evaluation) sentResolved(alert string, match map[string]string) bool {
	for _, a := range ev.sent {
		ok := a.Labels.Get(labels.AlertName) == alert && !a.ResolvedAt.IsZero()
		for k, v := range match {
			ok = ok && a.Labels.Get(k) == v
		}
		if ok {
			return true
		}
	}
	return false
}
