//! The kernel's socket diagnostics (`NETLINK_SOCK_DIAG`, what `ss -ti` reads): the TCP
//! connections established to a local port in this network namespace, each with when data
//! last moved on it. Any process may ask, for every socket of its network namespace (the
//! pod's, for the drain helper beside Ollama).

use std::time::Duration;

use model_orchestra::drain::Connection;
use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::nlas::Nla;
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, InetResponse, SocketId, StateFlags};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_sys::protocols::NETLINK_SOCK_DIAG;
use netlink_sys::{Socket, SocketAddr};

#[derive(Debug, thiserror::Error)]
pub enum SockDiagError {
    #[error("the kernel's socket diagnostics (NETLINK_SOCK_DIAG): {0}")]
    Io(#[from] std::io::Error),
    #[error("the kernel's socket diagnostics answered what cannot be read: {0}")]
    Decode(String),
}

/// The TCP connections established to local port `port`, over IPv4 and IPv6.
pub fn established_to(port: u16) -> Result<Vec<Connection>, SockDiagError> {
    let mut found = Vec::new();
    for family in [AF_INET, AF_INET6] {
        for response in dump(family)? {
            if response.header.socket_id.source_port == port {
                found.extend(connection(&response));
            }
        }
    }
    Ok(found)
}

/// What one socket's answer says, when it carries its `tcp_info`.
fn connection(response: &InetResponse) -> Option<Connection> {
    response.nlas.iter().find_map(|nla| match nla {
        Nla::TcpInfo(info) => Some(Connection {
            since_received: Duration::from_millis(info.last_data_recv.into()),
            since_sent: Duration::from_millis(info.last_data_sent.into()),
            sent_any: info.bytes_sent > 0 || info.data_segs_out > 0,
            queued: response.header.recv_queue > 0 || response.header.send_queue > 0,
        }),
        _ => None,
    })
}

/// Every established TCP socket of `family`, with its `tcp_info`.
fn dump(family: u8) -> Result<Vec<InetResponse>, SockDiagError> {
    let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let socket_id = if family == AF_INET { SocketId::new_v4() } else { SocketId::new_v6() };
    let request = InetRequest {
        family,
        protocol: IPPROTO_TCP,
        extensions: ExtensionFlags::INFO,
        states: StateFlags::ESTABLISHED,
        socket_id,
    };
    let mut packet = NetlinkMessage::new(header, SockDiagMessage::InetRequest(request).into());
    packet.finalize();
    let mut sent = vec![0; packet.buffer_len()];
    packet.serialize(&mut sent);
    socket.send(&sent, 0)?;

    let mut responses = Vec::new();
    let mut received = vec![0; 64 * 1024];
    loop {
        let size = socket.recv(&mut &mut received[..], 0)?;
        let mut at = 0;
        while at < size {
            let message = <NetlinkMessage<SockDiagMessage>>::deserialize(&received[at..size])
                .map_err(|e| SockDiagError::Decode(e.to_string()))?;
            let length = message.header.length as usize;
            match message.payload {
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(response)) => responses.push(*response),
                NetlinkPayload::Done(_) => return Ok(responses),
                NetlinkPayload::Error(e) => return Err(SockDiagError::Io(e.to_io())),
                _ => {}
            }
            if length == 0 {
                break;
            }
            at += length;
        }
    }
}

/// Loopback connections for the tests of this module and of the drain helper.
#[cfg(test)]
pub(crate) mod loopback {
    use std::net::{TcpListener, TcpStream};

    /// A request the engine gets, and its answer.
    pub const REQUEST: &[u8] = b"GET /api/tags HTTP/1.1\r\n\r\n";
    pub const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";

    /// A connection on 127.0.0.1: the port served, the client's end and the served end.
    pub fn accepted() -> (u16, TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (served, _) = listener.accept().unwrap();
        (port, client, served)
    }
}

#[cfg(test)]
mod tests {
    use super::loopback::{accepted, ANSWER, REQUEST};
    use super::*;
    use std::io::{Read, Write};

    fn only(port: u16) -> Connection {
        let found = established_to(port).unwrap();
        assert_eq!(found.len(), 1, "the server's end only (the client's is another port's): {found:?}");
        found[0]
    }

    #[test]
    fn a_connection_nothing_moved_on_has_sent_nothing() {
        let (port, _client, _served) = accepted();
        let seen = only(port);
        assert!(!seen.sent_any && !seen.queued, "{seen:?}");
    }

    #[test]
    fn a_request_read_and_not_answered_was_received_after_the_last_bytes_sent() {
        let (port, mut client, mut served) = accepted();
        served.write_all(b"hello\n").unwrap();
        client.read_exact(&mut [0; 6]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        client.write_all(REQUEST).unwrap();
        served.read_exact(&mut vec![0; REQUEST.len()]).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let seen = only(port);
        assert!(seen.sent_any && !seen.queued, "{seen:?}");
        assert!(seen.since_received < seen.since_sent, "{seen:?}");
    }

    #[test]
    fn an_answered_connection_was_sent_to_last() {
        let (port, mut client, mut served) = accepted();
        client.write_all(REQUEST).unwrap();
        served.read_exact(&mut vec![0; REQUEST.len()]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        served.write_all(ANSWER).unwrap();
        client.read_exact(&mut vec![0; ANSWER.len()]).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let seen = only(port);
        assert!(seen.sent_any && !seen.queued, "{seen:?}");
        assert!(seen.since_sent < seen.since_received, "{seen:?}");
        assert!(seen.since_sent >= Duration::from_millis(150), "{seen:?}");
    }

    #[test]
    fn bytes_the_engine_has_not_read_are_queued() {
        let (port, mut client, _served) = accepted();
        client.write_all(REQUEST).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(only(port).queued);
    }
}
