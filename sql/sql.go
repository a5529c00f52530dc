// Package sql holds zksched's PostgreSQL schema as numbered goose migrations, embedded in the
// binary so `zksched migrate` needs no files on disk. The migrations are the truth about the
// data model; design.md only sketches it.
package sql

import "embed"

// Migrations holds the files under migrations/, applied in order by dao.Migrate.
//
//go:embed migrations/*.sql
var Migrations embed.FS
