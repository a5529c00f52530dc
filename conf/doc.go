// Package conf holds zksched's configuration: its types and defaults, loading from a YAML
// file and ZKSCHED_* environment variables, and validation.
//
// # Sources
//
// [Load] starts from [Defaults], applies the YAML file, then the environment: the
// environment beats the file, the file beats the defaults. zksched.example.yaml beside this
// file documents every key with its default; a test keeps it equal to [Defaults].
//
// The file is decoded strictly. An unknown key is an error naming its dotted path and line
// (`conf: zksched.yaml:3: unknown key "registry.sesion-timeout"`), so a typo never falls back
// to a default unnoticed; so are a duplicate key, a value of the wrong type and a malformed
// duration. Durations are Go durations that may start with whole days (30d, 1d12h; see
// [ParseDuration]). A key left empty (`servers:` with nothing after it) keeps its default. Lists
// replace the default rather than add to it.
//
// Every key has an environment variable ZKSCHED_<SECTION>_<KEY>: the section and key upper-cased,
// with - and . turned into _, such as ZKSCHED_REGISTRY_SESSION_TIMEOUT=2s. Lists are
// comma-separated (ZKSCHED_REGISTRY_SERVERS=zk1:2181,zk2:2181). An empty variable counts as
// unset. A variable naming a known section but an unknown key is an error; one whose section
// is not a config section is ignored, because the worker passes ZKSCHED_TASK_INSTANCE,
// ZKSCHED_ATTEMPT and ZKSCHED_WORKER to the tasks it runs, and a task may itself run zksched.
//
// # Validation
//
// [Config.Validate] reports every problem at once, each naming its key. Beyond ranges and
// formats it enforces one safety rule of the failover protocol (see design.md): failover.delay
// must be at least worker.kill-grace plus 1 s ([KillGraceMargin]), so that a worker cut off from ZooKeeper has
// stopped its tasks before the leader re-queues them elsewhere.
package conf
