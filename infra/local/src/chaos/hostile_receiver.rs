//! Receivers that misbehave at the TCP level, for the chaos suite's `hostile` scenario.

use std::time::Duration;

/// A receiver that misbehaves at the TCP level, on loopback: each connection is read until
/// the request's headers end, then answered as `kind` says.
pub(super) async fn hostile_receiver(kind: &'static str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65_536];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                match kind {
                    // Accepts and never answers.
                    "sleeper" => tokio::time::sleep(Duration::from_secs(600)).await,
                    // Headers at once, then one body byte a second, for ever.
                    "slowloris" => {
                        let _ = sock
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n")
                            .await;
                        for _ in 0..600 {
                            if sock.write_all(b"x").await.is_err() {
                                return;
                            }
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                    // A 50 MB answer.
                    "huge" => {
                        let _ = sock
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 52428800\r\n\r\n")
                            .await;
                        let chunk = vec![b'y'; 1 << 20];
                        for _ in 0..50 {
                            if sock.write_all(&chunk).await.is_err() {
                                return;
                            }
                        }
                    }
                    // A redirect to the metadata address.
                    "redirect" => {
                        let _ = sock
                            .write_all(
                                b"HTTP/1.1 302 Found\r\nlocation: http://169.254.169.254/latest/meta-data\r\ncontent-length: 0\r\n\r\n",
                            )
                            .await;
                    }
                    // A 500 whose body is not UTF-8.
                    _ => {
                        let body: &[u8] = b"\xff\xfe\xc3\x28 broken \xa0\xa1";
                        let head = format!(
                            "HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\n\r\n",
                            body.len()
                        );
                        let _ = sock.write_all(head.as_bytes()).await;
                        let _ = sock.write_all(body).await;
                    }
                }
            });
        }
    });
    Ok(format!("http://{addr}/hook"))
}
