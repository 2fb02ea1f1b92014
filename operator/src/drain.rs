//! The drain of a stopping Ollama replica, decided without I/O: how many connections are
//! open to the engine's port (from the kernel's `/proc/net/tcp` tables of the pod's
//! network), and when the replica may be told to stop.
//!
//! Ollama has no graceful shutdown: SIGTERM closes its server, answers in flight included.
//! So the replica's `preStop` hook (an HTTP GET of the drain helper beside Ollama in the
//! pod, `model-orchestra-operator drain-helper`) waits, out of the Service, until nothing is
//! connected, rather than for a fixed time that is too long for an idle replica and too
//! short for a long answer on a busy machine. The model gateway opens one
//! connection per request, so an open connection is an answer in flight (or a client's
//! idle keep-alive connection, which holds the drain up to its bound: nothing on TCP tells
//! the two apart, and cutting an answer is the worse mistake).

use std::time::Duration;

/// `st` of a connection that is established, in the kernel's tables.
const ESTABLISHED: &str = "01";

/// The connections established to local port `port` in a `/proc/net/tcp` or
/// `/proc/net/tcp6` table: those a server on that port accepted (or the kernel did, for
/// it to accept). Lines that are not a socket's are skipped.
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
    };

    fn s(seconds: f64) -> Duration {
        Duration::from_secs_f64(seconds)
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
