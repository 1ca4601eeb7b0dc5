package promql_test

import (
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// engine is Prometheus's query engine as a server runs it (5 minute lookback).
var engine = promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
	Parser: pql})

// memStore holds series in memory for the engine and takes what the rules
// manager writes back (ALERTS, ALERTS_FOR_STATE; history_test.go): a test that
// needs a few thousand samples does without Prometheus's TSDB and its WAL.
type memStore struct{ series map[string]*memSeries }

type memSeries struct {
	labels  labels.Labels
	samples []chunks.Sample
}

func newMemStore() *memStore { return &memStore{series: map[string]*memSeries{}} }

func (m *memStore) add(l labels.Labels, t int64, v float64) {
	key := l.String()
	s := m.series[key]
	if s == nil {
		s = &memSeries{labels: l}
		m.series[key] = s
	}
	s.samples = append(s.samples, sample{t: t, f: v})
}

// loaded reads series in Prometheus's series notation, one per line
// (`name{labels} 0+10x20`), one sample a minute from time 0, as `promtool test
// rules` and promqltest load them.
func loaded(text string) *memStore {
	GinkgoHelper()
	m := newMemStore()
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		lset, values, err := pql.ParseSeriesDesc(strings.TrimSpace(line))
		Expect(err).NotTo(HaveOccurred(), line)
		for i, v := range values {
			if !v.Omitted {
				m.add(lset, (time.Duration(i) * time.Minute).Milliseconds(), v.Value)
			}
		}
	}
	return m
}

// Querier implements storage.Queryable.
func (m *memStore) Querier(_, _ int64) (storage.Querier, error) {
	return &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
		var out []storage.Series
		for _, s := range m.series {
			ok := true
			for _, mt := range matchers {
				ok = ok && mt.Matches(s.labels.Get(mt.Name))
			}
			if ok {
				sort.Slice(s.samples, func(i, j int) bool { return s.samples[i].T() < s.samples[j].T() })
				out = append(out, storage.NewListSeries(s.labels, s.samples))
			}
		}
		sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].Labels(), out[j].Labels()) < 0 })
		return &seriesSet{series: out, i: -1}
	}}, nil
}

type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                      { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series              { return s.series[s.i] }
func (*seriesSet) Err() error                        { return nil }
func (*seriesSet) Warnings() annotations.Annotations { return nil }

type sample struct {
	t int64
	f float64
}

func (s sample) T() int64                    { return s.t }
func (sample) ST() int64                     { return 0 }
func (s sample) F() float64                  { return s.f }
func (sample) H() *histogram.Histogram       { return nil }
func (sample) FH() *histogram.FloatHistogram { return nil }
func (sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s sample) Copy() chunks.Sample         { return s }
