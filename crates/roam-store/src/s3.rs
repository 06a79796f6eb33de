//! Sealed blobs in any S3-compatible object store ([`S3Store`]): for a server that outgrows one
//! disk (the Horatio paper's server tier). A blob `id` is the object `PREFIX/ab/abcdef...` in one
//! bucket, the same fan-out as [`crate::DirStore`]. Like every store it is not trusted: what it
//! returns is checked against its name by the reader ([`crate::fetch`]).
//!
//! On the Apache Arrow project's `object_store` crate (its S3 client signs requests with
//! SigV4, retries, and works with AWS, MinIO, versitygw and others). [`ChunkStore`] is
//! synchronous, so the store drives its own small tokio runtime. Tested against a real S3
//! server, versitygw, started by the test (`s3_tests`).

use std::sync::Arc;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};

use crate::chunk::ChunkId;
use crate::error::StoreError;
use crate::store::ChunkStore;

/// Where an S3 store is and how to sign for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Config {
    /// The endpoint, e.g. `http://127.0.0.1:7070` or `https://s3.eu-west-1.amazonaws.com`.
    pub endpoint: String,
    /// The bucket.
    pub bucket: String,
    /// The region (`us-east-1` where the server does not care).
    pub region: String,
    /// Access key id.
    pub access_key: String,
    /// Secret access key.
    pub secret_key: String,
    /// Object name prefix (may be empty).
    pub prefix: String,
}

/// Blobs in an S3 bucket.
pub struct S3Store {
    config: S3Config,
    client: Arc<AmazonS3>,
    rt: tokio::runtime::Runtime,
}

impl S3Store {
    /// A store on `config`'s bucket (no request is made until the first blob).
    pub fn open(config: S3Config) -> Result<S3Store, StoreError> {
        let bad = |why: String| StoreError::Backend {
            store: format!("s3 {}/{}", config.endpoint, config.bucket),
            why,
        };
        if !(config.endpoint.starts_with("http://") || config.endpoint.starts_with("https://")) {
            return Err(bad(format!(
                "endpoint `{}`: expected http:// or https://",
                config.endpoint
            )));
        }
        let client = AmazonS3Builder::new()
            .with_endpoint(&config.endpoint)
            .with_bucket_name(&config.bucket)
            .with_region(&config.region)
            .with_access_key_id(&config.access_key)
            .with_secret_access_key(&config.secret_key)
            .with_allow_http(config.endpoint.starts_with("http://"))
            .with_virtual_hosted_style_request(false)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| bad(format!("starting its runtime: {e}")))?;
        Ok(S3Store {
            config,
            client: Arc::new(client),
            rt,
        })
    }

    /// The object name of blob `id`.
    pub fn object(&self, id: &ChunkId) -> String {
        let hex = id.hex();
        let p = self.config.prefix.trim_matches('/');
        if p.is_empty() {
            format!("{}/{hex}", &hex[..2])
        } else {
            format!("{p}/{}/{hex}", &hex[..2])
        }
    }

    fn err(&self, id: &ChunkId, e: object_store::Error) -> StoreError {
        StoreError::Backend {
            store: self.name(),
            why: format!("chunk {id}: {e}"),
        }
    }
}

impl ChunkStore for S3Store {
    fn name(&self) -> String {
        format!("s3 {}/{}", self.config.endpoint, self.config.bucket)
    }

    fn put(&self, id: &ChunkId, blob: &[u8]) -> Result<(), StoreError> {
        if self.has(id)? {
            return Ok(());
        }
        let path = ObjectPath::from(self.object(id));
        let payload = PutPayload::from(blob.to_vec());
        self.rt
            .block_on(self.client.put(&path, payload))
            .map(|_| ())
            .map_err(|e| self.err(id, e))
    }

    fn get(&self, id: &ChunkId) -> Result<Option<Vec<u8>>, StoreError> {
        let path = ObjectPath::from(self.object(id));
        let r = self.rt.block_on(async {
            match self.client.get(&path).await {
                Ok(g) => g.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        r.map(|b| b.map(|b| b.to_vec()))
            .map_err(|e| self.err(id, e))
    }

    fn has(&self, id: &ChunkId) -> Result<bool, StoreError> {
        let path = ObjectPath::from(self.object(id));
        match self.rt.block_on(self.client.head(&path)) {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.err(id, e)),
        }
    }
}
