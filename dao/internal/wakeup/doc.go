// Package wakeup carries dao's wake-ups through PostgreSQL's LISTEN/NOTIFY: a Batcher sends
// them once the writes they announce have committed, many to a statement, and Listen
// delivers them to the masters and workers, several channels on one connection.
//
// A wake-up is a hint. Every listener also polls, and once its connection listens (at first
// and after every reconnection) it is told to look at everything (Wakeup.Rescan), so a
// wake-up lost on either side costs
// latency, never work. The package knows no channel and no statement: dao names the channels
// and gives the Batcher the statement that sends.
package wakeup
