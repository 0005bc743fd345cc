package stage

import (
	"context"
	"errors"
	"sync"
	"syscall"
)

// Requests and replies by id: one end asks (Call), the other answers with
// a Reply that carries the same id, and the asking end's reader, whatever
// it follows the link for, routes the answer to the Call that waits for
// it (Receive). The host side asks the init this way for each --publish
// connection; a new request is a row in the message table and a payload
// that implements Request or Reply, nothing more.

// Request is a payload that asks for one reply; Call numbers it.
type Request interface{ SetRequestID(id uint64) }

// Reply is a payload that answers the Request with its id.
type Reply interface{ RequestID() uint64 }

// calls are a link's requests that wait for their reply.
type calls struct {
	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan any // a Reply, or the error that ended the link
	ended   error
}

// Call sends req as a message of kind k and waits for its reply, until
// ctx ends. Someone must be reading the link (Receive) for the reply to
// arrive.
func (l *Link) Call(ctx context.Context, k Kind, req Request) (Reply, error) {
	c := &l.calls
	c.mu.Lock()
	if c.ended != nil {
		c.mu.Unlock()
		return nil, c.ended
	}
	c.next++
	id := c.next
	reply := make(chan any, 1)
	if c.pending == nil {
		c.pending = map[uint64]chan any{}
	}
	c.pending[id] = reply
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	req.SetRequestID(id)
	if err := l.Send(k, req); err != nil {
		return nil, err
	}
	select {
	case v := <-reply:
		if err, ok := v.(error); ok {
			return nil, err
		}
		return v.(Reply), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// answer routes r to its Call; one that nobody waits for any more (its
// Call gave up) is dropped, with any descriptor it carried. On an end that
// never made a Call it reports false: the reply is the reader's.
func (c *calls) answer(r Reply) bool {
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return false
	}
	reply, ok := c.pending[r.RequestID()]
	delete(c.pending, r.RequestID())
	c.mu.Unlock()
	if ok {
		reply <- r
		return true
	}
	if carrier, ok := r.(Carrier); ok {
		for _, fd := range carrier.Carried() {
			syscall.Close(fd)
		}
	}
	return true
}

// end fails every waiting Call, and every later one, with the error that
// ended the link's reading.
func (c *calls) end(err error) {
	if err == nil {
		err = errors.New("the link ended")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended == nil {
		c.ended = err
	}
	for id, reply := range c.pending {
		reply <- err
		delete(c.pending, id)
	}
}
