-- Vacuum the queue tables early. Each claim leaves behind a dead entry at the head of the
-- partial index it claims from (workflow_instance_unowned, task_instance_queued), and every
-- later claim reads past the dead entries until a vacuum removes them: on a 100,000-workflow
-- backlog, claims slowed the whole burn-down to 1,500 workflows/s until autovacuum ran, and
-- it ran 3,400/s throughout once it ran every 2 s. The default thresholds (20% of the table
-- dead) let a large history hold hundreds of thousands of dead entries; these tables are
-- vacuumed when 1% is, and analyzed when 2% changed. How often autovacuum looks is the
-- server's autovacuum_naptime (1 min by default; bin/services.sh sets 2 s; see
-- docs/performance.md, Tuning).

-- +goose Up
ALTER TABLE workflow_instance SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE task_instance SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE task_attempt SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05);

-- +goose Down
ALTER TABLE task_attempt RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE task_instance RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay);
ALTER TABLE workflow_instance RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay);
