-- A task whose kill was requested (an operator's kill, its workflow's stop or timeout) is no
-- longer put back in the queue: the failover's requeue and the worker's finish end it killed
-- where they used to queue it again with kill_requested still set, and the claim no longer
-- takes such a task (dao.TaskClaim), which older code started only for its worker to kill it
-- moments later. A task older code queued so would now wait for ever: it ends killed here, as
-- the new code would have ended it. The masters find these ends when they start (a resync of
-- the instances they own, a sweep of the unowned ones) and skip the tasks that follow.
--
-- The claim's indexes stay as they are: with no queued task kill-requested, the claim's new
-- condition drops none of the rows task_instance_queued and task_instance_queued_pool give.

-- +goose Up
UPDATE task_instance SET state = 'killed', ended_at = now(), not_before = NULL,
    error = 'killed by an operator'
WHERE state = 'queued' AND kill_requested;

-- +goose Down
-- Nothing to undo: the tasks ended as the code of this release ends them.
