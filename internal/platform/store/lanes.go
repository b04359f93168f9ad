package store

import (
	"context"
	"database/sql"
	"sync"
)

// lane is a set of connections kept for one kind of work, with its prepared statements and
// its turns to write. Requests from people and integrations use the DB's own (SQL, stmts,
// writer); agents' messages use their own lane (AgentWork), so that a console or an
// integration busy with every request connection never keeps a heartbeat waiting for one.
type lane struct {
	sql    *sql.DB
	stmts  *stmtCache
	writer *writeGate
}

type agentWorkKey struct{}

// AgentWork marks ctx as carrying an agent's message: the database work done with it runs on
// the agents' own connections.
func AgentWork(ctx context.Context) context.Context {
	return context.WithValue(ctx, agentWorkKey{}, true)
}

// route is the lane of the work ctx carries.
func (db *DB) route(ctx context.Context) lane {
	if db.agents.sql != nil && ctx.Value(agentWorkKey{}) != nil {
		return db.agents
	}
	return lane{sql: db.SQL, stmts: db.stmts, writer: db.writer}
}

// AgentWriters is how many of the agents' writes run at once: one on SQLite, whose file has
// one writer.
func (db *DB) AgentWriters() int {
	if db.agents.writer == nil {
		return 1
	}
	return db.agents.writer.slots
}

// agentTxs are the agents' lane's open transactions: a transaction's statements must be
// prepared on its own pool, whatever context its statements are run with.
var agentTxs sync.Map // *sql.Tx → struct{}

// txLane is the lane tx was begun on.
func (db *DB) txLane(tx *sql.Tx) lane {
	if _, ok := agentTxs.Load(tx); ok {
		return db.agents
	}
	return lane{sql: db.SQL, stmts: db.stmts, writer: db.writer}
}

func (l lane) lock(ctx context.Context, urgent bool) error {
	if l.writer == nil {
		return nil
	}
	return l.writer.lock(ctx, urgent)
}

func (l lane) unlock() {
	if l.writer != nil {
		l.writer.unlock()
	}
}
