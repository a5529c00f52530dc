-- workflow_instance_created (created_at DESC, id DESC), from 00001, served no list: the
-- workflow list pages by id (dao.WorkflowListPage), and only the benchmark's counts of the
-- instances it submitted read created_at, which now take a range of the primary key instead
-- (dao.WorkflowLastID). Every new version of an instance row (its creation, each change of
-- state) wrote an entry into it.

-- +goose Up
DROP INDEX IF EXISTS workflow_instance_created;

-- +goose Down
CREATE INDEX IF NOT EXISTS workflow_instance_created ON workflow_instance (created_at DESC, id DESC);
