//! The drain of a stopping Ollama replica, decided without I/O: which connections to the
//! engine's port may still carry an answer (from what the kernel says of each), and when the
//! replica may be told to stop.
//!
//! Ollama has no graceful shutdown: SIGTERM closes its server, answers in flight included.
//! So the replica's `preStop` hook (an HTTP GET of the drain helper beside Ollama in the
//! pod, `model-orchestra-operator drain-helper`) waits, out of the Service, until no
//! connection carries an answer, rather than for a fixed time that is too long for an idle
//! replica and too short for a long answer on a busy machine.
//!
//! An open connection is not always an answer in flight: a client's pool keeps answered
//! connections open, idle (the API server's pod proxy, which the operator's model calls go
//! through, keeps one for 90 s after its last use: every deleted replica waited for it,
//! 70–94 s). HTTP/1.1 tells the two apart on the wire: a request in flight has the client
//! speaking last (the engine owes the answer), an answered idle connection has the engine
//! speaking last, then silence. A streamed answer has the engine speaking last too, but
//! recently; so an engine silent for `stream_gap` after its last bytes counts as done. An
//! idle connection is then left to be closed with the engine, as an HTTP server's graceful
//! shutdown closes idle keep-alive connections at once.

use std::time::Duration;

/// What the kernel says of one connection the engine accepted (`tcp_info` and the socket's
/// queues, from its socket diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// Since data last came in (`tcpi_last_data_recv`; from the connection's start until
    /// some does).
    pub since_received: Duration,
    /// Since the engine last sent data (`tcpi_last_data_sent`; likewise).
    pub since_sent: Duration,
    /// Whether the engine has sent any data on it (`tcpi_bytes_sent` > 0).
    pub sent_any: bool,
    /// Bytes that came in and the engine has not read, or that it sent and the client has
    /// not acknowledged.
    pub queued: bool,
}

/// Whether a connection may still carry an answer: the engine has sent nothing on it yet
/// (a request owed its first answer, or a connection nothing has moved on), bytes are
/// queued either way, the client spoke after the engine's last bytes (a request owed its
/// answer), or the engine sent within `stream_gap` (an answer streaming). Otherwise it
/// answered and nothing came since: idle. (A request answered within the kernel's clock
/// tick shows both silences equal: answered, since an engine speaks only after a request.)
pub fn carries_an_answer(connection: Connection, stream_gap: Duration) -> bool {
    !connection.sent_any
        || connection.queued
        || connection.since_received < connection.since_sent
        || connection.since_sent < stream_gap
}

/// `st` of a connection that is established, in the kernel's tables.
const ESTABLISHED: &str = "01";

/// The connections established to local port `port` in a `/proc/net/tcp` or
/// `/proc/net/tcp6` table: those a server on that port accepted (or the kernel did, for
/// it to accept). Lines that are not a socket's are skipped. The tables say nothing of
/// when data moved: where the kernel's socket diagnostics cannot be read, every open
/// connection counts as carrying an answer.
pub fn open_connections(table: &str, port: u16) -> usize {
    table
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let local = fields.nth(1)?;
            let state = fields.nth(1)?;
            let (_, local_port) = local.rsplit_once(':')?;
            Some((u16::from_str_radix(local_port, 16).ok()?, state))
        })
        .filter(|&(local_port, state)| local_port == port && state == ESTABLISHED)
        .count()
}

/// How long a drain lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainBounds {
    /// Kept however idle: while the pod leaves its Service's endpoints, every kube-proxy
    /// (and so the model gateway's next connection) may still send it a request.
    pub at_least: Duration,
    /// Given up then, with whatever is open: the pod's grace period but a margin.
    pub at_most: Duration,
    /// How long nothing may be open before the replica counts as idle: a probe's
    /// connection, or a request between the kernel's tables being read, is not idleness.
    pub quiet: Duration,
    /// How long an engine silent after its last bytes may still be streaming an answer
    /// ([`carries_an_answer`]).
    pub stream_gap: Duration,
}

/// What the connections seen so far mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Look again.
    Wait,
    /// Nothing open for `quiet`, and `at_least` passed: stop.
    Idle,
    /// `at_most` passed with `open` connections still open: stop anyway.
    GaveUp { open: usize },
}

/// A drain under way: fed what each look at the tables found.
#[derive(Debug, Clone)]
pub struct Drain {
    bounds: DrainBounds,
    /// When the connections last dropped to none (since the drain began).
    idle_since: Option<Duration>,
}

impl Drain {
    pub fn new(bounds: DrainBounds) -> Drain {
        Drain { bounds, idle_since: None }
    }

    /// `open` connections seen `elapsed` after the drain began.
    pub fn observe(&mut self, elapsed: Duration, open: usize) -> Verdict {
        if open > 0 {
            self.idle_since = None;
        } else if self.idle_since.is_none() {
            self.idle_since = Some(elapsed);
        }
        let quiet = self.idle_since.is_some_and(|since| elapsed.saturating_sub(since) >= self.bounds.quiet);
        if quiet && elapsed >= self.bounds.at_least {
            Verdict::Idle
        } else if elapsed >= self.bounds.at_most {
            Verdict::GaveUp { open }
        } else {
            Verdict::Wait
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/net/tcp` as the kernel writes it: a listener on 11434 (0x2CAA), a connection
    /// it accepted, one it answered and the peer closed (CLOSE_WAIT), one in TIME_WAIT, and
    /// the replica's own connection out to its runner (a remote port of 11434 elsewhere).
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:2CAA 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65532        0 41230 1 0000000000000000 100 0 0 10 0
   1: 0A2A0005:2CAA 0A2A0009:9C40 01 00000000:00000000 00:00000000 00000000 65532        0 41231 1 0000000000000000 20 4 30 10 -1
   2: 0A2A0005:2CAA 0A2A0009:9C42 08 00000000:00000000 00:00000000 00000000 65532        0 41232 1 0000000000000000 20 4 30 10 -1
   3: 0A2A0005:2CAA 0A2A0009:9C44 06 00000000:00000000 03:00000F3C 00000000     0        0 0 3 0000000000000000
   4: 0100007F:A1B2 0100007F:2CAA 01 00000000:00000000 00:00000000 00000000 65532        0 41233 1 0000000000000000 20 4 30 10 -1
";

    /// `/proc/net/tcp6`: a connection accepted on 11434 over IPv6.
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:2CAA 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 65532        0 51230 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000500A8C0:2CAA 0000000000000000FFFF00000900A8C0:D431 01 00000000:00000000 00:00000000 00000000 65532        0 51231 1 0000000000000000 20 4 30 10 -1
";

    const BOUNDS: DrainBounds = DrainBounds {
        at_least: Duration::from_secs(5),
        at_most: Duration::from_secs(115),
        quiet: Duration::from_secs(1),
        stream_gap: Duration::from_secs(15),
    };

    fn s(seconds: f64) -> Duration {
        Duration::from_secs_f64(seconds)
    }

    /// A connection the engine has answered on, nothing queued.
    fn answered(since_received: f64, since_sent: f64) -> Connection {
        Connection { since_received: s(since_received), since_sent: s(since_sent), sent_any: true, queued: false }
    }

    #[test]
    fn a_request_the_engine_has_not_answered_carries_an_answer_however_long_it_waits() {
        let first = Connection { sent_any: false, ..answered(60.0, 90.0) };
        assert!(carries_an_answer(first, BOUNDS.stream_gap));
        // A later request on a connection answered before.
        assert!(carries_an_answer(answered(60.0, 90.0), BOUNDS.stream_gap));
    }

    #[test]
    fn a_connection_nothing_has_moved_on_yet_carries_an_answer() {
        // Both silences count from the connection's start.
        let fresh = Connection { sent_any: false, ..answered(30.0, 30.0) };
        assert!(carries_an_answer(fresh, BOUNDS.stream_gap));
    }

    #[test]
    fn an_answer_streaming_carries_an_answer_while_the_engine_sent_within_the_gap() {
        assert!(carries_an_answer(answered(20.0, 0.2), BOUNDS.stream_gap));
        assert!(carries_an_answer(answered(20.0, 14.9), BOUNDS.stream_gap));
    }

    #[test]
    fn bytes_queued_either_way_carry_an_answer() {
        let unread = Connection { queued: true, ..answered(40.0, 30.0) };
        assert!(carries_an_answer(unread, BOUNDS.stream_gap));
    }

    #[test]
    fn an_answered_connection_silent_for_the_gap_is_idle() {
        assert!(!carries_an_answer(answered(16.0, 15.0), BOUNDS.stream_gap));
        assert!(!carries_an_answer(answered(89.0, 88.9), BOUNDS.stream_gap));
    }

    #[test]
    fn a_request_answered_within_a_clock_tick_is_answered() {
        // The API server's pod proxy asking `/api/tags`: in and out in the same tick.
        assert!(!carries_an_answer(answered(20.0, 20.0), BOUNDS.stream_gap));
    }

    #[test]
    fn only_connections_established_to_the_port_count() {
        assert_eq!(open_connections(TCP, 11434), 1);
    }

    #[test]
    fn connections_over_ipv6_count_as_well() {
        assert_eq!(open_connections(TCP6, 11434), 1);
    }

    #[test]
    fn another_ports_connections_do_not_count() {
        assert_eq!(open_connections(TCP, 8080), 0);
    }

    #[test]
    fn a_table_that_is_not_the_kernels_counts_nothing() {
        assert_eq!(open_connections("", 11434), 0);
        assert_eq!(open_connections("garbage\n1: x y\n", 11434), 0);
    }

    #[test]
    fn an_idle_replica_stops_once_its_shortest_drain_has_passed() {
        let mut drain = Drain::new(BOUNDS);
        assert_eq!(drain.observe(s(0.0), 0), Verdict::Wait);
        assert_eq!(drain.observe(s(4.9), 0), Verdict::Wait);
        assert_eq!(drain.observe(s(5.0), 0), Verdict::Idle);
    }

    #[test]
    fn a_replica_answering_waits_until_its_connections_have_been_gone_for_the_quiet_time() {
        let mut drain = Drain::new(BOUNDS);
        assert_eq!(drain.observe(s(0.0), 2), Verdict::Wait);
        assert_eq!(drain.observe(s(40.0), 1), Verdict::Wait);
        assert_eq!(drain.observe(s(60.0), 0), Verdict::Wait);
        assert_eq!(drain.observe(s(60.5), 0), Verdict::Wait);
        assert_eq!(drain.observe(s(61.0), 0), Verdict::Idle);
    }

    #[test]
    fn a_connection_seen_in_the_quiet_time_starts_it_again() {
        let mut drain = Drain::new(BOUNDS);
        assert_eq!(drain.observe(s(6.0), 0), Verdict::Wait);
        assert_eq!(drain.observe(s(6.5), 1), Verdict::Wait);
        assert_eq!(drain.observe(s(7.2), 0), Verdict::Wait);
        assert_eq!(drain.observe(s(8.0), 0), Verdict::Wait);
        assert_eq!(drain.observe(s(8.2), 0), Verdict::Idle);
    }

    #[test]
    fn a_connection_that_stays_open_is_given_up_on_at_the_longest_drain() {
        let mut drain = Drain::new(BOUNDS);
        assert_eq!(drain.observe(s(0.0), 1), Verdict::Wait);
        assert_eq!(drain.observe(s(114.9), 1), Verdict::Wait);
        assert_eq!(drain.observe(s(115.0), 1), Verdict::GaveUp { open: 1 });
    }
}
