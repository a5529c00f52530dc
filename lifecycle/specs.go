package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// Specs caches parsed workflow definitions: a stored version never changes, so it is read
// and parsed once. A cache serves one database: (name, version) names different definitions
// in different databases. The zero value is ready to use. The specs it returns are shared:
// read them, never change them.
type Specs struct {
	mu sync.Mutex
	m  map[specKey]*workflow.Spec
}

type specKey struct {
	name    string
	version int
}

// Get returns version version of the definition of workflow name, read with q the first time.
func (c *Specs) Get(ctx context.Context, q *dao.Queries, name string, version int) (*workflow.Spec, error) {
	k := specKey{name, version}
	c.mu.Lock()
	s, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	raw, err := q.DefinitionGet(ctx, name, version)
	if err != nil {
		return nil, err
	}
	s = new(workflow.Spec)
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("definition %s version %d: %w", name, version, err)
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[specKey]*workflow.Spec{}
	}
	c.m[k] = s
	c.mu.Unlock()
	return s, nil
}
