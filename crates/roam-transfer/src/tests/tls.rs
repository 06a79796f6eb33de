//! The engine over HTTPS, against hyper's server behind rustls: ALPN, a private authority, an
//! untrusted certificate.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;

use super::{answer, bytes, fetch_one, file_map, scratch};
use crate::engine::Connector;
use crate::{Engine, FileSpec, Params, Protocol};

/// An HTTPS server of these files on hyper's server with a fresh self-signed certificate for
/// 127.0.0.1, offering `alpn` (`h2`, `http/1.1`): its base URL, the certificate's PEM, and
/// the connections that chose HTTP/1.1 and HTTP/2.
async fn tls_server(
    files: &[(&str, Vec<u8>)],
    alpn: &[&[u8]],
) -> (String, String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    use rustls::pki_types::pem::PemObject;
    let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (cert, key) = (c.cert.pem(), c.signing_key.serialize_pem());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
            rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
        )
        .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}", l.local_addr().unwrap());
    let files = file_map(files);
    let (h1, h2) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (c1, c2) = (h1.clone(), h2.clone());
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let (acceptor, files, c1, c2) =
                (acceptor.clone(), files.clone(), c1.clone(), c2.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return; // an untrusting client
                };
                let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                let service =
                    hyper::service::service_fn(move |r: hyper::Request<hyper::body::Incoming>| {
                        let resp = answer(&files, &r);
                        async move { resp }
                    });
                let io = hyper_util::rt::TokioIo::new(tls);
                if http2 {
                    c2.fetch_add(1, Ordering::SeqCst);
                    let _ = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(io, service)
                    .await;
                } else {
                    c1.fetch_add(1, Ordering::SeqCst);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                }
            });
        }
    });
    (base, cert, h1, h2)
}

/// Over HTTPS (the server's certificate trusted through `with_ca_file`): the survey finds
/// HTTP/2 in the server's ALPN answer, and a dataset moves in ranges over HTTP/1.1 and over
/// HTTP/2, each on connections of the version asked for, byte for byte. A server whose ALPN
/// offers HTTP/1.1 only is found so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_moves_over_the_version_alpn_agrees() {
    let files: Vec<(String, Vec<u8>)> = (0..4)
        .map(|i| (format!("/t/f{i}.bin"), bytes(200_000, 40 + i)))
        .collect();
    let refs: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
    let dir = scratch("https-ca");
    std::fs::create_dir_all(&dir).unwrap();
    for (alpn, offers_h2) in [
        (&[&b"h2"[..], b"http/1.1"][..], true),
        (&[&b"http/1.1"[..]][..], false),
    ] {
        let (base, cert, h1, h2) = tls_server(&refs, alpn).await;
        let ca = dir.join(format!("ca-{offers_h2}.pem"));
        std::fs::write(&ca, &cert).unwrap();
        let connector = Connector::new(None).with_ca_file(&ca).unwrap();
        let mut specs: Vec<FileSpec> = files
            .iter()
            .map(|(p, _)| FileSpec::from_url(&format!("{base}{p}")).unwrap())
            .collect();
        let params = |protocol| Params {
            cc: 2,
            p: 3,
            protocol,
            ..Params::default()
        };
        let survey =
            Arc::new(Engine::with_connector(params(Protocol::Http1), connector.clone()).unwrap());
        let sv = survey.survey(&specs).await.unwrap();
        assert_eq!(sv.h2c_for_all(&[0, 1, 2, 3]), offers_h2, "{sv:?}");
        assert_eq!(sv.sizes, vec![200_000; 4]);
        sv.apply(&mut specs);
        let protocols: &[Protocol] = if offers_h2 {
            &[Protocol::Http1, Protocol::Http2]
        } else {
            &[Protocol::Http1]
        };
        for &protocol in protocols {
            let before = (h1.load(Ordering::SeqCst), h2.load(Ordering::SeqCst));
            let out = scratch(&format!("https-{protocol:?}-{offers_h2}"));
            let e = Arc::new(Engine::with_connector(params(protocol), connector.clone()).unwrap());
            let r = e.run(&specs, &out).await.unwrap();
            for ((p, body), f) in files.iter().zip(&r.files) {
                assert_eq!(f.outcome, "ok", "{protocol:?}");
                assert_eq!(std::fs::read(out.join(&p[3..])).unwrap(), *body);
            }
            let after = (h1.load(Ordering::SeqCst), h2.load(Ordering::SeqCst));
            match protocol {
                Protocol::Http1 => assert!(after.0 > before.0 && after.1 == before.1, "{after:?}"),
                Protocol::Http2 => assert!(after.1 > before.1 && after.0 == before.0, "{after:?}"),
            }
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server whose certificate no trusted authority signed is an error naming the URL and the
/// certificate, and nothing is saved; a CA file without a certificate is refused, named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_https_server_is_an_error_naming_it() {
    let (base, _, _, _) = tls_server(&[("/u/f.bin", bytes(1000, 1))], &[b"http/1.1"]).await;
    let out = scratch("untrusted");
    let e = Arc::new(Engine::new(Params::default()).unwrap());
    let r = fetch_one(&e, &format!("{base}/u/f.bin"), &out).await;
    let o = &r.files[0].outcome;
    assert!(
        o.contains(&format!("{base}/u/f.bin")) && o.contains("certificate"),
        "{o}"
    );
    assert!(!out.join("f.bin").exists());
    std::fs::create_dir_all(&out).unwrap();
    let bad = out.join("ca.pem");
    std::fs::write(&bad, "not a certificate\n").unwrap();
    let err = Connector::new(None)
        .with_ca_file(&bad)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ca.pem") && err.contains("no certificate"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
