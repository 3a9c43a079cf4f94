package redisstore

import (
	"testing"

	"github.com/mailsink/mailsink/store/storetest"
)

// TestConformance runs the shared store suite on a single Redis and, when
// MAILSINK_TEST_REDIS_CLUSTER is set, on a Redis Cluster; every store it
// asks for gets a key prefix of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, newStore func(testing.TB) *Store) {
		storetest.Run(t, func(t *testing.T) storetest.Store { return newStore(t) })
	})
}
