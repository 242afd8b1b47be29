package metrics

import (
	"context"
	"database/sql"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics is one replica's series. A nil *Metrics counts nothing, so
// code paths outside a server (tests, tools) need no setup.
type Metrics struct {
	Registry *prometheus.Registry

	accepted      prometheus.Counter
	acceptSeconds prometheus.Histogram
	started       *prometheus.CounterVec
	startWait     prometheus.Histogram
	ended         *prometheus.CounterVec
	recoveries    prometheus.Counter
	modelSeconds  *prometheus.HistogramVec
	modelTokens   *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	streams       *prometheus.GaugeVec
	streamEvents  *prometheus.CounterVec
}

// New returns a replica's metrics over db: the series below, the
// database pool's statistics, gauges read from the database at each
// scrape (queued turns, pending approvals), and Go's runtime and
// process collectors.
func New(db *sql.DB) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "turngate_turns_accepted_total",
			Help: "Turns accepted (a retried submission counts once)."}),
		acceptSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "turngate_accept_seconds",
			Help: "Time to accept a submission durably, in the server.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turngate_turns_started_total",
			Help: "Run attempts started, by whether it was a turn's first attempt or a recovery."}, []string{"attempt"}),
		startWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "turngate_accept_to_start_seconds",
			Help: "From acceptance to the first attempt's start: the wait in the room's lane.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turngate_turns_ended_total",
			Help: "Turns ended, by outcome and reason."}, []string{"outcome", "reason"}),
		recoveries: prometheus.NewCounter(prometheus.CounterOpts{Name: "turngate_lease_takeovers_total",
			Help: "Runs taken over after their lease expired (recoveries)."}),
		modelSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "turngate_model_step_seconds",
			Help: "Model step latency, by route and purpose.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"route", "purpose", "outcome"}),
		modelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turngate_model_tokens_total",
			Help: "Model tokens, by route and direction (in, out)."}, []string{"route", "direction"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turngate_tool_calls_total",
			Help: "Tool calls, by tool and outcome (ok, refused, failed)."}, []string{"tool", "outcome"}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "turngate_streams_open",
			Help: "Open subscription connections, by transport (ws, sse)."}, []string{"transport"}),
		streamEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turngate_stream_events_total",
			Help: "Subscription events sent, by encoding: encoded for the subscriber, or shared (the bytes another subscriber's encoding of the same value in the same operation shape left)."}, []string{"encoding"}),
	}
	reg.MustRegister(m.accepted, m.acceptSeconds, m.started, m.startWait, m.ended, m.recoveries,
		m.modelSeconds, m.modelTokens, m.toolCalls, m.streams, m.streamEvents,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewDBStatsCollector(db, "turngate"),
		dbGauge(db, "turngate_lane_queued_turns", "Turns accepted and waiting in their room's lane.",
			`SELECT count(*) FROM turns WHERE state = 'queued'`),
		dbGauge(db, "turngate_approvals_pending", "Proposed external effects waiting for a member's decision.",
			`SELECT count(*) FROM approvals WHERE state = 'pending'`))
	for _, t := range []string{"ws", "sse"} {
		m.streams.WithLabelValues(t)
	}
	for _, e := range []string{"encoded", "shared"} {
		m.streamEvents.WithLabelValues(e)
	}
	return m
}

// dbGauge is a gauge read with one statement at each scrape (bounded by
// a second); a failed read reports nothing rather than a wrong value.
func dbGauge(db *sql.DB, name, help, query string) prometheus.Collector {
	return &queryGauge{db: db, query: query, desc: prometheus.NewDesc(name, help, nil, nil)}
}

type queryGauge struct {
	db    *sql.DB
	query string
	desc  *prometheus.Desc
}

func (g *queryGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *queryGauge) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var n float64
	if err := g.db.QueryRowContext(ctx, g.query).Scan(&n); err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, n)
}

// Accepted counts a new acceptance and how long it took.
func (m *Metrics) Accepted(took time.Duration) {
	if m == nil {
		return
	}
	m.accepted.Inc()
	m.acceptSeconds.Observe(took.Seconds())
}

// Started counts a run attempt; for a first attempt, waited is the time
// since acceptance.
func (m *Metrics) Started(attempt int, waited time.Duration) {
	if m == nil {
		return
	}
	if attempt <= 1 {
		m.started.WithLabelValues("first").Inc()
		m.startWait.Observe(max(waited, 0).Seconds())
		return
	}
	m.started.WithLabelValues("recovery").Inc()
	m.recoveries.Inc()
}

// Ended counts a turn's terminal outcome.
func (m *Metrics) Ended(outcome, reason string) {
	if m == nil {
		return
	}
	m.ended.WithLabelValues(outcome, reason).Inc()
}

// ModelStep counts one model step.
func (m *Metrics) ModelStep(route, purpose string, took time.Duration, in, out int, failed bool) {
	if m == nil {
		return
	}
	outcome := "ok"
	if failed {
		outcome = "failed"
	}
	m.modelSeconds.WithLabelValues(route, purpose, outcome).Observe(took.Seconds())
	m.modelTokens.WithLabelValues(route, "in").Add(float64(in))
	m.modelTokens.WithLabelValues(route, "out").Add(float64(out))
}

// ToolCall counts one tool call by its outcome: ok, refused or failed.
func (m *Metrics) ToolCall(tool, outcome string) {
	if m == nil {
		return
	}
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
}

// StreamOpened counts an open stream of transport until the returned
// function is called.
func (m *Metrics) StreamOpened(transport string) func() {
	if m == nil {
		return func() {}
	}
	g := m.streams.WithLabelValues(transport)
	g.Inc()
	return g.Dec
}

// StreamEvent counts one subscription event sent, shared or encoded for
// its subscriber.
func (m *Metrics) StreamEvent(shared bool) {
	if m == nil {
		return
	}
	if shared {
		m.streamEvents.WithLabelValues("shared").Inc()
		return
	}
	m.streamEvents.WithLabelValues("encoded").Inc()
}
