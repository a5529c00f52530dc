package lifecycle

import (
	"context"
	"time"

	"github.com/zksched/zksched/dao"
)

// IdempotentHook is the prefix of the hook name under which SubmitOnce records an API
// submission's Idempotency-Key (the user's name follows it). No webhook trigger can have it:
// a hook's name has no '/'.
const IdempotentHook = "api/"

// SubmitOnce creates the instance s unless user submitted one with key within window, as
// Deliver does for a webhook's retried delivery and with its table (hook_delivery, under the
// hook IdempotentHook+user): the key's row and the instance commit in one transaction, so of
// a submission and its retry (after an answer lost on the way, or sent to another master)
// exactly one creates an instance, and a submission that fails leaves the key free. It
// returns the instance, and whether it is an earlier submission's.
func SubmitOnce(ctx context.Context, db *dao.DB, s Submission, user, key, client string, window time.Duration) (int64, bool, error) {
	var id int64
	var again bool
	err := db.Tx(ctx, func(q *dao.Queries) error {
		id, again = 0, false
		row, err := q.HookDeliveryRecord(ctx, IdempotentHook+user, &key, dao.HookSubmitted, client, window)
		if err != nil {
			return err
		}
		if row == 0 {
			prev, err := q.HookDeliveryGet(ctx, IdempotentHook+user, key)
			if err != nil {
				return err
			}
			if prev.WorkflowInstanceID != nil {
				id = *prev.WorkflowInstanceID
			}
			again = true
			return nil
		}
		if id, err = Submit(ctx, q, s); err != nil {
			return err
		}
		return q.HookDeliverySetInstance(ctx, row, id)
	})
	if err != nil {
		return 0, false, err
	}
	return id, again, nil
}
