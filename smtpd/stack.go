package smtpd

// A transaction runs deep: Data calls ingest, the store and its client
// (Redis commands, JSON encoding), and MAIL reads the account's fault rules
// from the store. go-smtp serves each connection on a goroutine of its own,
// which starts with a small stack and grows it by doubling, copying the
// stack each time at whatever depth it ran out: on a new connection per
// message, two or three copies deep in the store call, each walking every
// frame. reserveStack, called where a transaction starts (few frames deep),
// grows it once to what a transaction needs, at the price of one shallow
// copy; a goroutine whose stack is big enough already pays a call.
// BenchmarkReserveStack measures it alone: a call 20 KB deep on a new
// goroutine took 2.74-2.92 µs without it and 1.04-1.11 µs with it.

// stackReserve is the stack a transaction is given room for: a message
// stored in Redis needs more than 16 KB (JSON encoding grew a 16 KB stack
// again). The frame leaves 8 KB for what is in use below Mail, so that
// the runtime's doubling stops at 32 KB rather than 64 KB.
const stackReserve = 32 << 10

// reserveStack makes room for stackReserve bytes of stack below its
// caller. grow must be false: the frame's size alone grows the stack, and
// the array is never touched (a true grow would zero it).
//
//go:noinline
func reserveStack(grow bool) byte {
	if grow {
		var frame [stackReserve - 8<<10]byte
		return keep(frame[:])
	}
	return 0
}

//go:noinline
func keep(b []byte) byte { return b[len(b)/2] }
