// socks5-server: a SOCKS5 proxy for the tests of gazctl's --socks-server (docs/networking.md),
// on github.com/armon/go-socks5.
//
//	socks5-server -listen 127.0.0.1:0 -listen unix:/tmp/x.sock -host broker.test=127.0.0.1
//	socks5-server -forward 127.0.0.1:1080=unix:/tmp/x.sock
//
// With -listen (repeatable) it serves SOCKS5 (no authentication, CONNECT) on each address, a
// TCP host:port or unix:<path>, and prints each bound address on its own line of stdout once
// all are listening. Every CONNECT is logged on stderr ("CONNECT <name> <ip:port>") so that a
// test can see which targets went through it; then "OPEN <ip:port>" when the target answered
// (or "FAILED <ip:port>: <why>"), and "CLOSE <ip:port>" when the proxy is done with that
// connection (once the client has closed its side too). Names given with -host (repeatable, name=ip)
// resolve to that address here and nowhere else; with -only-hosts, other names do not resolve
// at all. Names are always resolved by this server (clients send them unresolved).
//
// With -forward listen=dial (repeatable) it only relays bytes: each TCP connection accepted on
// `listen` is joined to a new connection to `dial` (host:port or unix:<path>). Run inside a
// network namespace whose only way out is a Unix socket of the proxy, it makes the proxy
// reachable there as an ordinary host:port.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"sync"

	socks5 "github.com/armon/go-socks5"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// resolver resolves the -host names, then (unless onlyHosts) the system's.
type resolver struct {
	hosts     map[string]net.IP
	onlyHosts bool
}

func (r resolver) Resolve(ctx context.Context, name string) (context.Context, net.IP, error) {
	if ip, ok := r.hosts[strings.ToLower(name)]; ok {
		return ctx, ip, nil
	}
	if r.onlyHosts {
		return ctx, nil, fmt.Errorf("unknown host %s", name)
	}
	addr, err := net.ResolveIPAddr("ip", name)
	if err != nil {
		return ctx, nil, err
	}
	return ctx, addr.IP, nil
}

// logRule allows every request and logs its target.
type logRule struct{ log *log.Logger }

func (l logRule) Allow(ctx context.Context, req *socks5.Request) (context.Context, bool) {
	name := req.DestAddr.FQDN
	if name == "" {
		name = "-"
	}
	l.log.Printf("CONNECT %s %s", name, net.JoinHostPort(req.DestAddr.IP.String(), fmt.Sprint(req.DestAddr.Port)))
	return ctx, true
}

// loggedConn logs when the proxy is done with a target connection ("CLOSE <ip:port>"): go-socks5
// closes it once both directions of the relay have ended, so after the client closed its side.
type loggedConn struct {
	net.Conn
	log  *log.Logger
	once sync.Once
}

func (c *loggedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.log.Printf("CLOSE %s", c.Conn.RemoteAddr()) })
	return err
}

func listen(addr string) (net.Listener, error) {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		_ = os.Remove(p)
		return net.Listen("unix", p)
	}
	return net.Listen("tcp", addr)
}

func dial(addr string) (net.Conn, error) {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		return net.Dial("unix", p)
	}
	return net.Dial("tcp", addr)
}

func bound(l net.Listener) string {
	if l.Addr().Network() == "unix" {
		return "unix:" + l.Addr().String()
	}
	return l.Addr().String()
}

func relay(l net.Listener, to string, logger *log.Logger) {
	for {
		c, err := l.Accept()
		if err != nil {
			logger.Fatalf("accept: %v", err)
		}
		go func() {
			defer c.Close()
			d, err := dial(to)
			if err != nil {
				logger.Printf("forward to %s: %v", to, err)
				return
			}
			defer d.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(d, c); closeWrite(d) }()
			go func() { defer wg.Done(); _, _ = io.Copy(c, d); closeWrite(c) }()
			wg.Wait()
		}()
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

func main() {
	var listens, hosts, forwards multi
	flag.Var(&listens, "listen", "serve SOCKS5 on this address (host:port or unix:<path>; repeatable)")
	flag.Var(&hosts, "host", "resolve name to ip here (name=ip; repeatable)")
	flag.Var(&forwards, "forward", "relay TCP connections: listen=dial (repeatable)")
	onlyHosts := flag.Bool("only-hosts", false, "resolve only the -host names")
	flag.Parse()
	logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds)
	if len(listens) == 0 && len(forwards) == 0 {
		logger.Fatal("nothing to do: give -listen or -forward")
	}

	var ls []net.Listener
	var addrs []string
	for _, f := range forwards {
		from, to, ok := strings.Cut(f, "=")
		if !ok {
			logger.Fatalf("-forward %q: expected listen=dial", f)
		}
		l, err := listen(from)
		if err != nil {
			logger.Fatalf("listen %s: %v", from, err)
		}
		addrs = append(addrs, bound(l))
		go relay(l, to, logger)
	}
	if len(listens) > 0 {
		r := resolver{hosts: map[string]net.IP{}, onlyHosts: *onlyHosts}
		for _, h := range hosts {
			name, ip, ok := strings.Cut(h, "=")
			if !ok || net.ParseIP(ip) == nil {
				logger.Fatalf("-host %q: expected name=ip", h)
			}
			r.hosts[strings.ToLower(name)] = net.ParseIP(ip)
		}
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				logger.Printf("FAILED %s: %v", addr, err)
				return nil, err
			}
			logger.Printf("OPEN %s", c.RemoteAddr())
			return &loggedConn{Conn: c, log: logger}, nil
		}
		srv, err := socks5.New(&socks5.Config{Resolver: r, Rules: logRule{logger}, Logger: logger, Dial: dial})
		if err != nil {
			logger.Fatal(err)
		}
		for _, a := range listens {
			l, err := listen(a)
			if err != nil {
				logger.Fatalf("listen %s: %v", a, err)
			}
			ls = append(ls, l)
			addrs = append(addrs, bound(l))
		}
		for _, l := range ls {
			go func(l net.Listener) { logger.Fatal(srv.Serve(l)) }(l)
		}
	}
	for _, a := range addrs {
		fmt.Println(a)
	}
	select {}
}
