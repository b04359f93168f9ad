// Package jobs runs Gale's background work on River, over whichever database the server
// uses: durable jobs with retries, and periodic jobs that run once per interval across all
// nodes (River elects one leader to schedule them).
package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"gale/internal/platform/store"
)

// Periodic is work that runs every interval.
type Periodic struct {
	Name  string
	Every time.Duration
	Run   func(ctx context.Context) error
}

// periodicArgs names which periodic task a job runs.
type periodicArgs struct {
	Name string `json:"name"`
}

func (periodicArgs) Kind() string { return "periodic" }

type periodicWorker struct {
	river.WorkerDefaults[periodicArgs]
	tasks  map[string]Periodic
	logger *slog.Logger
	done   func(name string, err error)
}

func (w *periodicWorker) Work(ctx context.Context, job *river.Job[periodicArgs]) error {
	task, ok := w.tasks[job.Args.Name]
	if !ok {
		return river.JobCancel(fmt.Errorf("unknown periodic task %q", job.Args.Name))
	}
	err := task.Run(ctx)
	if err != nil {
		w.logger.ErrorContext(ctx, "periodic task failed", "task", task.Name, "error", err)
	}
	if w.done != nil {
		w.done(task.Name, err)
	}
	return err
}

// Options configure the runner.
type Options struct {
	Periodic []Periodic
	// OnDone, when set, is told of every finished periodic run (tests wait on it).
	OnDone func(name string, err error)
}

// Runner is a started job queue.
type Runner struct {
	stop    func(ctx context.Context) error
	closeDB func() error
}

// Start starts the queue's workers and periodic schedules.
func Start(ctx context.Context, db *store.DB, logger *slog.Logger, opts Options) (*Runner, error) {
	workers := river.NewWorkers()
	tasks := map[string]Periodic{}
	var periodic []*river.PeriodicJob
	for _, p := range opts.Periodic {
		tasks[p.Name] = p
		args := periodicArgs{Name: p.Name}
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(p.Every),
			func() (river.JobArgs, *river.InsertOpts) { return args, nil },
			&river.PeriodicJobOpts{RunOnStart: true, ID: p.Name}))
	}
	river.AddWorker(workers, &periodicWorker{tasks: tasks, logger: logger, done: opts.OnDone})
	cfg := &river.Config{
		Logger:       logger.With("component", "jobs"),
		Queues:       map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		Workers:      workers,
		PeriodicJobs: periodic,
	}
	switch db.Dialect {
	case store.Postgres:
		return start(ctx, riverpgxv5.New(db.Pool), cfg, nil)
	case store.SQLite:
		// River gets its own single-connection pool on the same file, as its SQLite driver needs.
		jobDB, err := sql.Open("sqlite", store.SQLiteDSN(db.Path))
		if err != nil {
			return nil, err
		}
		jobDB.SetMaxOpenConns(1)
		return start(ctx, riversqlite.New(jobDB), cfg, jobDB.Close)
	}
	return nil, fmt.Errorf("jobs: unsupported dialect %s", db.Dialect)
}

func start[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], cfg *river.Config, closeDB func() error) (*Runner, error) {
	client, err := river.NewClient(driver, cfg)
	if err != nil {
		return nil, fmt.Errorf("create job queue: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("start job queue: %w", err)
	}
	return &Runner{stop: client.Stop, closeDB: closeDB}, nil
}

// Stop waits for running jobs to finish (until ctx ends) and stops the queue.
func (r *Runner) Stop(ctx context.Context) error {
	err := r.stop(ctx)
	if r.closeDB != nil {
		if cerr := r.closeDB(); err == nil {
			err = cerr
		}
	}
	return err
}
