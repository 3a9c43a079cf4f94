package redisstore

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// classify turns an error from go-redis into a store error. Anything that
// means "Redis cannot answer now" (the network, timeouts, a server that is
// loading, a cluster without quorum, a cancelled request) is Unavailable, so
// the edges answer 503 or SMTP 451 and the client retries. A reply Redis
// gives to a well-formed request in a healthy state is Internal: it is a bug
// here. redis.Nil is for the caller to handle; it is Internal if it gets
// this far.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var serr *store.Error
	if errors.As(err, &serr) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return store.Wrap(store.Unavailable, err, "store unavailable")
	}
	if redis.IsOOMError(err) {
		return store.Wrap(store.Full, err, "storage is full")
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && !transientReply(err) {
		return store.Wrap(store.Internal, err, "store error")
	}
	return store.Wrap(store.Unavailable, err, "store unavailable")
}

// transientReply reports whether an error reply from Redis means the server
// or cluster cannot serve the request now, rather than that the request is
// wrong. Authentication failures count: they are a deployment problem the
// client cannot fix, and the store is unusable until it is fixed.
func transientReply(err error) bool {
	switch {
	case redis.IsLoadingError(err), redis.IsClusterDownError(err), redis.IsTryAgainError(err),
		redis.IsMasterDownError(err), redis.IsMaxClientsError(err), redis.IsReadOnlyError(err),
		redis.IsOOMError(err), redis.IsNoReplicasError(err), redis.IsAuthError(err):
		return true
	}
	for _, prefix := range []string{"BUSY", "MISCONF", "NOAUTH", "WRONGPASS", "NOPERM"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
