package metrics

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/handoffdesk/desk/internal/queue"
)

// poolCollector reports pgxpool's statistics as they are at the scrape.
type poolCollector struct {
	db                                              *pgxpool.Pool
	total, idle, acquired, max                      *prometheus.Desc
	acquires, emptyAcquires, canceledAcquires, wait *prometheus.Desc
}

func newPoolCollector(db *pgxpool.Pool) *poolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("handoffdesk_db_pool_"+name, help, nil, nil)
	}
	return &poolCollector{
		db:               db,
		total:            d("connections", "Connections in the pool, idle, in use or being opened."),
		idle:             d("idle_connections", "Idle connections in the pool."),
		acquired:         d("acquired_connections", "Connections in use."),
		max:              d("max_connections", "The pool's size limit."),
		acquires:         d("acquires_total", "Connections acquired from the pool."),
		emptyAcquires:    d("empty_acquires_total", "Acquires that had to wait or open a connection because none was idle."),
		canceledAcquires: d("canceled_acquires_total", "Acquires given up (deadline or cancel) before a connection was free."),
		wait:             d("acquire_wait_seconds_total", "Time spent waiting for a connection, summed over acquires."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.total, c.idle, c.acquired, c.max, c.acquires, c.emptyAcquires, c.canceledAcquires, c.wait} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.db.Stat()
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.TotalConns()))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.IdleConns()))
	ch <- prometheus.MustNewConstMetric(c.acquired, prometheus.GaugeValue, float64(s.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.emptyAcquires, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.canceledAcquires, prometheus.CounterValue, float64(s.CanceledAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.wait, prometheus.CounterValue, s.AcquireDuration().Seconds())
}

// stateTimeout bounds the scrape's queries: a slow database makes the scrape lose these series,
// reported as a scrape error, rather than hold a pooled connection for long.
const stateTimeout = 2 * time.Second

// State is what a scrape asks the packages that own the desk's tables: the queues' lines of the
// roster (queue) and the webhook backlog (webhook). The desk's state lives in the database, shared
// by every instance, so it is read there when scraped, not counted by each instance.
type State struct {
	Queues  func(context.Context) ([]queue.Health, error)
	Backlog func(context.Context) (int, error)
}

type stateCollector struct {
	read                   State
	depth, oldest, backlog *prometheus.Desc
}

func newStateCollector(read State) *stateCollector {
	return &stateCollector{
		read:    read,
		depth:   prometheus.NewDesc("handoffdesk_queue_depth", "Packages waiting in the queue for an agent (queued or reserved).", []string{"queue"}, nil),
		oldest:  prometheus.NewDesc("handoffdesk_queue_oldest_waiting_seconds", "Age of the queue's longest-waiting queued package since it was enqueued; 0 when none waits.", []string{"queue"}, nil),
		backlog: prometheus.NewDesc("handoffdesk_webhook_outbox_backlog", "Webhook deliveries pending in the outbox, due or waiting for a retry.", nil, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.oldest
	ch <- c.backlog
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	queues, err := c.read.Queues(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.depth, err)
	}
	for _, q := range queues {
		var oldest float64
		if q.OldestWait != nil {
			oldest = time.Since(*q.OldestWait).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(q.Waiting+q.Reserved), q.Name)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest, q.Name)
	}
	backlog, err := c.read.Backlog(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.backlog, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(backlog))
}
