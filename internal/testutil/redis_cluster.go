package testutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// clusterWait bounds how long a cluster may take to form or to settle
// after a failover, on a loaded machine.
const clusterWait = 2 * time.Minute

// RedisClusterServer is a Redis Cluster of redis-server processes on
// loopback.
type RedisClusterServer struct {
	// URL is the cluster's --redis-url: redis+cluster://host:port,...
	URL string
	// Addrs are the masters the cluster was created with. The slice has
	// no spare capacity, so clients given it as their seed list (go-redis
	// appends the nodes it discovers to that slice) never write into an
	// array they share.
	Addrs []string
	// Prefix is the test's own key prefix (a cluster has one database,
	// which the tests of a binary share).
	Prefix string

	nodes    []*clusterNode
	replicas map[string]string // master address -> its replica's
}

type clusterNode struct {
	addr    string
	bus     int // cluster bus port
	dir     string
	pidFile string
}

var clusterState struct {
	mu  sync.Mutex
	srv *RedisClusterServer
	err error
}

var clusterPrefixes atomic.Int64

// RedisCluster returns a three-master Redis Cluster (no replicas) started
// once per test binary, with a key prefix of the test's own; the keys
// under the prefix are deleted when the test ends.
func RedisCluster(t testing.TB) *RedisClusterServer {
	t.Helper()
	requireMain(t)
	clusterState.mu.Lock()
	if clusterState.srv == nil && clusterState.err == nil {
		clusterState.srv, clusterState.err = startCluster(0, 0)
		if clusterState.err == nil {
			srv := clusterState.srv
			onStop(func() error { return srv.stop() })
		}
	}
	srv, err := clusterState.srv, clusterState.err
	clusterState.mu.Unlock()
	if err != nil {
		t.Fatalf("testutil: RedisCluster: %v", err)
	}
	view := *srv
	view.Prefix = fmt.Sprintf("t%d:", clusterPrefixes.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := view.deletePrefix(ctx); err != nil {
			t.Logf("testutil: RedisCluster: delete keys of %s: %v", view.Prefix, err)
		}
	})
	return &view
}

// RedisClusterWithReplicas starts a three-master cluster of the test's own
// with one replica per master, for tests that stop nodes; it is stopped
// when the test ends. nodeTimeout is the cluster-node-timeout: how long a
// master may be unreachable before its replica takes over.
func RedisClusterWithReplicas(t testing.TB, nodeTimeout time.Duration) *RedisClusterServer {
	t.Helper()
	requireMain(t)
	srv, err := startCluster(1, nodeTimeout)
	if err != nil {
		t.Fatalf("testutil: RedisClusterWithReplicas: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.stop(); err != nil {
			t.Logf("testutil: RedisClusterWithReplicas: %v", err)
		}
	})
	srv.Prefix = "t0:"
	return srv
}

// Client returns a cluster client, closed when the test ends.
func (c *RedisClusterServer) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	t.Cleanup(func() { cl.Close() })
	return cl
}

// ReplicaOf returns the address of the replica the cluster was created
// with for master.
func (c *RedisClusterServer) ReplicaOf(master string) string { return c.replicas[master] }

// Kill stops the node at addr at once (SIGKILL), as a crash would, and
// returns once the process is gone.
func (c *RedisClusterServer) Kill(addr string) error {
	for _, n := range c.nodes {
		if n.addr != addr {
			continue
		}
		b, err := os.ReadFile(n.pidFile)
		if err != nil {
			return fmt.Errorf("kill %s: %w", addr, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			return fmt.Errorf("kill %s: pid file holds %q", addr, b)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill %s: %w", addr, err)
		}
		if !waitExit(pid, clusterWait) {
			return fmt.Errorf("kill %s: process %d still running after %v", addr, pid, clusterWait)
		}
		return nil
	}
	return fmt.Errorf("no node %s in the cluster", addr)
}

// deletePrefix deletes the keys under the prefix on every master.
func (c *RedisClusterServer) deletePrefix(ctx context.Context) error {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	defer cl.Close()
	return cl.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, globQuote(c.Prefix)+"*", 1000).Iterator()
		pipe := node.Pipeline()
		for iter.Next(ctx) {
			pipe.Unlink(ctx, iter.Val()) // one key per command: keys of other slots
		}
		if err := iter.Err(); err != nil {
			return err
		}
		_, err := pipe.Exec(ctx)
		return err
	})
}

func globQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (c *RedisClusterServer) stop() error {
	var errs []error
	for _, n := range c.nodes {
		killPIDFile(n.pidFile, syscall.SIGTERM)
		killPIDFile(n.pidFile, syscall.SIGKILL)
		if err := os.RemoveAll(n.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startCluster starts three masters with replicas replicas each, assigns
// them a third of the slots each, and waits until every node reports
// cluster_state:ok (and every replica is in sync with its master).
func startCluster(replicas int, nodeTimeout time.Duration) (_ *RedisClusterServer, err error) {
	if nodeTimeout == 0 {
		nodeTimeout = 15 * time.Second // Redis' default
	}
	c := &RedisClusterServer{replicas: map[string]string{}}
	defer func() {
		if err != nil {
			_ = c.stop() // err is the one to report
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	const masters = 3
	for i := 0; i < masters*(1+replicas); i++ {
		n, err := startClusterNode(ctx, nodeTimeout)
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.addr})
		defer clients[i].Close()
	}
	ids := make([]string, len(c.nodes))
	for i, cl := range clients {
		if ids[i], err = cl.Do(ctx, "cluster", "myid").Text(); err != nil {
			return nil, fmt.Errorf("cluster myid of %s: %w", c.nodes[i].addr, err)
		}
		// Distinct config epochs from the start, as redis-cli --cluster
		// create gives: left at 0, nodes settle them by collisions, and a
		// replica can end up with its master's epoch. If that is also the
		// cluster's highest, CLUSTER FAILOVER TAKEOVER claims the slots at
		// an epoch no greater than the dead master's, and the other nodes
		// never accept the claim.
		if err := cl.Do(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
			return nil, fmt.Errorf("cluster set-config-epoch on %s: %w", c.nodes[i].addr, err)
		}
	}
	for i := 0; i < masters; i++ {
		lo, hi := i*clusterSlots/masters, (i+1)*clusterSlots/masters-1
		if err := clients[i].Do(ctx, "cluster", "addslotsrange", lo, hi).Err(); err != nil {
			return nil, fmt.Errorf("cluster addslotsrange on %s: %w", c.nodes[i].addr, err)
		}
		c.Addrs = append(c.Addrs, c.nodes[i].addr)
	}
	// The bus port is given: it is not the default (port + 10000).
	host, port, _ := net.SplitHostPort(c.nodes[0].addr)
	for i := 1; i < len(c.nodes); i++ {
		if err := clients[i].Do(ctx, "cluster", "meet", host, port, c.nodes[0].bus).Err(); err != nil {
			return nil, fmt.Errorf("cluster meet from %s: %w", c.nodes[i].addr, err)
		}
	}
	// A replica can follow its master once it knows it.
	for i := masters; i < len(c.nodes); i++ {
		m := (i - masters) % masters
		if err := poll(ctx, func() error {
			return clients[i].ClusterReplicate(ctx, ids[m]).Err()
		}); err != nil {
			return nil, fmt.Errorf("cluster replicate %s to %s: %w", c.nodes[i].addr, c.nodes[m].addr, err)
		}
		c.replicas[c.nodes[m].addr] = c.nodes[i].addr
	}
	for i, cl := range clients {
		if err := poll(ctx, func() error { return clusterReady(ctx, cl, i >= masters, len(c.nodes)) }); err != nil {
			return nil, fmt.Errorf("cluster node %s: %w", c.nodes[i].addr, err)
		}
	}
	c.Addrs = slices.Clip(c.Addrs)
	urlHosts := strings.Join(c.Addrs, ",")
	c.URL = "redis+cluster://" + urlHosts
	return c, nil
}

// clusterReady reports whether a node sees the whole cluster healthy.
func clusterReady(ctx context.Context, cl *redis.Client, replica bool, nodes int) error {
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:" + strconv.Itoa(clusterSlots), "cluster_known_nodes:" + strconv.Itoa(nodes)} {
		if !strings.Contains(info, want+"\r\n") {
			return fmt.Errorf("cluster info lacks %s:\n%s", want, info)
		}
	}
	if replica {
		repl, err := cl.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(repl, "master_link_status:up") {
			return errors.New("replica not in sync with its master yet")
		}
	}
	return nil
}

// poll calls f until it succeeds or ctx ends, returning f's last error.
func poll(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startClusterNode starts one cluster-enabled, non-persistent server on
// free ports (client and cluster bus), retrying when a port was taken.
func startClusterNode(ctx context.Context, nodeTimeout time.Duration) (n *clusterNode, err error) {
	bin, err := ensureInstalled("redis-server", redisServerPath)
	if err != nil {
		return nil, err
	}
	dir, err := newServerDir("redis-cluster", false)
	if err != nil {
		return nil, err
	}
	n = &clusterNode{dir: dir, pidFile: filepath.Join(dir, redisPIDFile)}
	defer func() {
		if err != nil {
			killPIDFile(n.pidFile, syscall.SIGKILL)
			os.RemoveAll(dir)
		}
	}()
	logFile := filepath.Join(dir, "redis.log")
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		bus, err := freePort()
		if err != nil {
			return nil, err
		}
		os.Remove(logFile)
		os.Remove(filepath.Join(dir, "nodes.conf"))
		err = runLogged(ctx, dir, filepath.Join(dir, "redis-start.log"), false, bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
			"--save", "", "--appendonly", "no",
			// A replica's first sync starts at once, not after the
			// default 5 s wait for more replicas.
			"--repl-diskless-sync-delay", "0",
			"--daemonize", "yes", "--pidfile", n.pidFile, "--logfile", logFile, "--dir", dir)
		if err != nil {
			return nil, err
		}
		err = waitRedis(ctx, port, n.pidFile, logFile)
		if err == nil {
			n.addr, n.bus = net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), bus
			return n, nil
		}
		if attempt < 5 && errors.Is(err, errPortTaken) {
			continue
		}
		return nil, err
	}
}
