package main

import (
	"net"
	"sync"
)

// Connection caps. Every connection holds a file descriptor (and a
// goroutine and buffers) for as long as its client keeps it open, and a
// client needs no key to open one: without a cap, enough idle or slow
// connections exhaust the process's descriptors, and then it can no
// longer accept anyone, nor open files. llama-server has no such caps.
const (
	// defaultMaxConns is the most connections open at once.
	defaultMaxConns = 2048
	// defaultMaxConnsPerClient is the most connections one client
	// address may hold open; far above what a client sends in parallel
	// (llama.cpp's benchmarks run 64 clients from one address).
	defaultMaxConnsPerClient = 256
)

// connLimiter is a listener that closes, at once, the connections past
// its caps: total connections open, and connections open from one
// client address (TCP; the clients of a Unix socket share the total
// only). 0 is no cap.
type connLimiter struct {
	net.Listener
	total, perClient int

	mu     sync.Mutex
	open   int
	byAddr map[string]int
}

func limitConns(ln net.Listener, total, perClient int) net.Listener {
	if total <= 0 && perClient <= 0 {
		return ln
	}
	return &connLimiter{Listener: ln, total: total, perClient: perClient, byAddr: map[string]int{}}
}

// Accept returns the next connection within the caps; one past them is
// closed without a word, and the next awaited.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := clientKey(c.RemoteAddr())
		l.mu.Lock()
		if (l.total > 0 && l.open >= l.total) || (key != "" && l.perClient > 0 && l.byAddr[key] >= l.perClient) {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		l.open++
		if key != "" {
			l.byAddr[key]++
		}
		l.mu.Unlock()
		return &limitedConn{Conn: c, l: l, key: key}, nil
	}
}

// done counts a connection of key closed.
func (l *connLimiter) done(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if key == "" {
		return
	}
	if l.byAddr[key]--; l.byAddr[key] <= 0 {
		delete(l.byAddr, key)
	}
}

// clientKey is the client address a connection counts under: its IP
// address ("" for other kinds of addresses).
func clientKey(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return ""
}

// limitedConn gives its place back when closed (once).
type limitedConn struct {
	net.Conn
	l    *connLimiter
	key  string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.done(c.key) })
	return err
}
