// Package registry is everything zksched does with ZooKeeper: the session and what the node
// knows of it, node registration, leader election, fence markers, and inspection of the tree.
// It knows nothing of PostgreSQL. The failover package builds the protocol of design.md on these
// mechanics; this file explains them.
//
// # Layout
//
// Under a configurable root (default /zksched; it may be nested, like /a/b):
//
//	<root>/nodes/masters/<id>                 EPHEMERAL             NodeInfo JSON
//	<root>/nodes/workers/<id>                 EPHEMERAL             NodeInfo JSON
//	<root>/election/_c_<guid>-n_<seq>         EPHEMERAL_SEQUENTIAL  the master's id
//	<root>/failover-finish-nodes/<role>/<id>  PERSISTENT            FenceRecord JSON
//
// <id> is the node's identity, "host:port_startMillis" (see Identity): a restarted process is a
// new node, so its old incarnation can be failed over while the new one works. Dial creates the
// persistent znodes. All data is plain JSON (or a plain id) so zkCli.sh and ZooInspector show it;
// a znode whose data does not parse is reported beside the others (DataError), never fatal.
// Names and data read from znodes are printed and logged through Printable, so a name or a
// value holding control characters (a newline, a terminal escape) shows escaped. A reply from
// ZooKeeper larger than 4 MiB fails its request (zk.ErrResponseTooLarge) instead of growing the
// node's memory.
//
// # Who may write: ACLs
//
// ZooKeeper checks a request against the ACL of the znode it touches, and a create or delete
// against the ACL of the parent: CREATE and DELETE on a folder decide who may add or remove its
// children, WRITE on a znode who may change its data, ADMIN who may change its ACL. ACLs are
// not inherited; each znode gets its own when it is created.
//
// With Config.Auth (registry.auth-file, a digest user:password shared by every node of the
// cluster), the client authenticates every connection before any other request goes out on it
// (the patched go-zookeeper's WithAuth: the first connection, reconnects to the same session and
// new sessions alike), and every znode it creates, the root and the ancestors it makes
// included, gets all rights for that user and READ for world:anyone. zkCli.sh, ZooInspector and
// zksched zk read the tree without credentials; nobody else can create a marker, an election
// candidate or a node znode, delete one, or change data or ACLs under the root. At Dial the
// client also sets that ACL on the root, its fixed folders and the existing fence markers where
// they lack it (a tree made by a version without ACLs; logged), and fails with a clear error
// when their ACL belongs to other credentials. Ephemeral znodes of nodes still running an older
// version keep an open ACL until those nodes restart, but the folders above them are closed.
// Without Config.Auth the tree is open (world:anyone, all rights) and Dial refuses a tree that
// is already protected, since the node could register nothing in it; a ReadOnly client
// (zksched zk, submit --wait) neither creates nor checks anything.
//
// The digest password crosses the network at every connection, in clear unless the connection
// is TLS: with Config.TLS every connection (and the conf four-letter word at start) goes
// through go-zookeeper's dialer as TLS to the servers' secureClientPort (ZooKeeper 3.5+, Netty
// connection factory), checking the servers' certificates and offering a client certificate.
// The connect response the Client reads for the granted timeout is read inside the TLS stream.
//
// Without ACLs anyone who reaches ZooKeeper can disturb the cluster; what the mechanics below
// still hold against such writes: a child of election/ counts only in the exact name form the
// election makes and only while ephemeral, and a fence marker beside a node's znode held by its
// live session is no fence (see Registration). Neither makes an open tree safe: someone who can
// delete a node's znode can still have it failed over.
//
// # The session
//
// A Client holds one ZooKeeper session at a time (go-zookeeper underneath, driven through its
// event callback: its event channel drops events when full). Status tells where it stands:
//
//	  Dial
//	    │
//	    ▼   connection lost            reconnected, same session
//	Connected ─────────────► Disconnected ─────────────────────► Connected
//	    ▲                         │
//	    │ new session             │ server: session expired
//	    │ (new SessionID)         ▼ (or a session no server accepts, below)
//	    └──────────────────── Expired
//
// Disconnected is not dead. Only ZooKeeper decides that a session is dead, and it says so only to
// a client that reaches it again; go-zookeeper never expires a session on its own side, and
// sessions even survive a whole-ensemble outage. So the node keeps its own clock:
//
//   - SessionTimeout is the timeout the server granted, which may differ from the one asked for.
//     go-zookeeper v1.0.4 does not expose it; the Client's dialer reads it from the connect
//     response on the wire (sniff.go).
//   - LastContact is the start time of the last request the ensemble's leader answered, by
//     registry.Now (CLOCK_BOOTTIME: it counts a suspend of the machine, as the servers do): a probe (a Sync of the root) every SessionTimeout/10, at most 1 s apart, and
//     every session handshake. A Sync, because a follower cut off from its leader keeps
//     answering reads while the leader, which expires sessions, hears nothing of the client. A
//     request answered was received after it was sent, and the server expires a session no
//     sooner than SessionTimeout after the last request it received, so the session is alive
//     at least until LastContact+SessionTimeout. Past that the node must assume it was declared
//     dead (the watchdog of the failover package).
//
// The session timeout must outlast a change of ZooKeeper leader: followers give up on a frozen
// or lost leader after syncLimit × tickTime, and until a new leader serves no request that goes
// through the leader is answered, the probe included. So SessionTimeout should be at least
// 2 × syncLimit × tickTime (20 s with ZooKeeper's sample tickTime 2000 and syncLimit 5). At
// start the Client reads each server's settings with the conf four-letter word, where the
// server's 4lw.commands.whitelist allows it (a refusal is a debug line), and warns when the
// timeout is shorter, or when the servers granted another timeout than the one asked for.
//
// A new SessionID always means the previous session is gone, whether or not Expired was seen:
// Changed is a broadcast and states can pass faster than a reader looks.
//
// A server that takes the TCP connection and then answers nothing (frozen, hung) holds a
// reconnecting client for its handshake limit: SessionTimeout divided by the number of servers,
// as in the Java client, and at most 2/3 of it. So a client that tries a frozen server next
// still reaches a live one before its session can expire.
//
// A session no server accepts. A server restarted with an empty data directory refuses the
// session of a client that has seen a later zxid than the server has ("has seen zxid 0x… our
// last zxid is 0x…"): it closes the connection without an answer, and go-zookeeper retries the
// session forever (upstream issue #36). A server without a quorum closes the connection in the
// same way, and there the session is alive: the servers renew every session once they serve
// again, even after an outage longer than the timeout. The Client counts handshakes dropped by
// a server after the TCP connection was accepted; after three in a row spanning at least
// SessionTimeout it opens a fresh connection (no session id, no last zxid) beside the stuck one.
// If that one gets a session, the Client reads its server's last zxid (the header of any reply
// carries it). Only a server behind the stuck session's last zxid refuses it: then the fresh
// connection replaces the old, reported as Expired then Connected with a new SessionID. A
// server that has seen it all (a quorum back) accepts the old session at its next try, and a
// fresh connection that gets no session means the ensemble is not serving; in both cases
// nothing changes. A session that no server has refused is never given up.
//
// # Registration: why a fenced multi
//
// A node's ephemeral znode is created only by this multi, which commits all or nothing:
//
//	Create(failover-finish-nodes/<role>/<id>)   fails if the marker exists: the node is fenced
//	Delete(failover-finish-nodes/<role>/<id>)   undoes the line above
//	Create(nodes/<role>s/<id>, EPHEMERAL)       the registration itself
//
// A plain Create is never used: after an expiry go-zookeeper silently opens a new session and
// still sends the requests queued during the outage, so a plain Create queued before the leader
// fenced the node would re-register it behind the leader's back. When the multi's answer is lost
// (connection loss), the Registration reads the znode back: it is registered if the znode's
// ephemeral owner is the current session.
//
//	  Register
//	     │  fenced multi ok
//	     ▼
//	Registered(sid) ──── marker appears ────────────────────► Fenced (final)
//	     │                                                      ▲
//	     │ session sid gone (new SessionID, Expired),           │
//	     │ or the znode deleted                                 │ marker exists
//	     ▼                                                      │
//	   Lost ─────── fenced multi under the new session ─────────┘
//	     │
//	     └──────── multi ok ───────► Registered(new sid)
//
// While Disconnected the state stays Registered: the session may live. In the background the
// Registration rewrites its NodeInfo (HeartbeatAt) every InfoInterval (liveness is the session,
// never this data), and watches its own marker: an ExistsW re-armed after every event and every
// reconnect, plus a plain check on every refresh, because a one-shot watch can be lost across a
// reconnect. Existence is always decided by reading, never by the event (the multi above fires
// the watch too). A fenced node must stop everything and exit; that is the caller's job.
//
// A marker is a fence only if a leader could have made it. Fence succeeds only while the node's
// znode is absent, and the znode is made only by the fenced multi, which fails while the marker
// exists. So when, after reading the marker, the Registration reads its znode and finds it held
// by its current session, the znode has existed since before the marker came and no leader made
// the marker: someone wrote it by hand (possible only on a tree without ACLs). The node logs
// that as an error and goes on; the marker still bars the identity's re-registration after a
// session expiry, and the leader does not count it either (failover/doc.go). A read that cannot
// decide (connection gone, session changed) is repeated at the next wake-up.
//
// Each Registration and Election does all its ZooKeeper work in one goroutine, in order, and never
// abandons a request half-way, so a request can never overtake one sent before it (Close's
// delete cannot precede a late create). Public one-shot calls that take a context stop waiting
// when it ends; the requests they may leave behind are reads, or writes that carry their own
// checks (Fence and the marker calls).
//
// # Election
//
// Each master's candidacy is an EPHEMERAL_SEQUENTIAL znode under election/ holding its id, named
// exactly _c_<32 hex digits>-n_<10 digits>; any other child of election/, and a persistent one of
// that name, is not a candidacy and is ignored (and logged once). The lowest sequence leads, and every candidate watches the children (re-armed after each event and
// reconnect, re-read every InfoInterval). The znode's name carries a random GUID, as in
// go-zookeeper's protected create, so a candidate whose create was answered too late finds it and
// removes extras. The candidacy too is created by a fenced multi:
//
//	Create(marker) + Delete(marker) + CheckVersion(nodes/masters/<id>, -1) + Create(candidate)
//
// so a fenced or unregistered master never becomes a candidate, not even through a request queued
// before an expiry. IsLeader is true only while the candidate was lowest at the last look and its
// session is connected and registered now: a disconnected leader is not leader at once (it cannot
// know whether its session lives) and leads again if the same session comes back with the znode.
// After an expiry the candidate is gone with its session; the Election rejoins once the
// Registration has re-registered under the new session, never while Lost, and never once Fenced
// (it then deletes its candidate at once).
//
// Leadership is never certain. Every write of the leader carries its own proof in the same multi:
// CheckVersion(own candidate znode, -1) fails once the znode is gone, so a deposed leader changes
// nothing.
//
// # The leader's primitives
//
// Fence runs, in one multi: the leader check; Create+Delete of nodes/<role>s/<id>, which fails if
// the node has registered again; and Create of the marker in phase fenced. It returns
// ErrNotLeader, ErrNodeRegistered or ErrAlreadyFenced (a previous leader fenced it: go on and
// finish it). FinishMarker and DeleteMarker carry the same leader check. After a connection loss
// the outcome is read back (the marker holds exactly the data written, or is gone). Members lists
// a role's registered nodes with a children watch; watches only make the leader fast, its periodic
// resync makes it correct. Reads that decide something (Members, Marker, Markers, Tree, Cluster)
// begin with a Sync, since a reconnect may land on a follower that lags behind the leader.
//
// # A worker's peers
//
// Peers lists the other registered workers that serve every group of a worker, with the slots
// their data gives (read once per worker; never Running, which is refreshed every 2 s and too
// stale for a burst): a worker's claims take no more than their share of a burst while these
// have free slots, which PostgreSQL counts. The list follows the membership through a children
// watch and a periodic resync; a dead worker stays listed until its session expires, and the
// claims bound what that costs (see dao.Share).
package registry
