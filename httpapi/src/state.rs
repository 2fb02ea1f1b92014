//! What every request shares: the live keys, the rate limiter, the per-key Kubernetes
//! clients that act for each key by impersonation, the read cache and the validation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use model_orchestra_api::InputError;
use serde_json::Value;

use crate::cache::ReadCache;
use crate::error::ApiError;
use crate::keys::KeyStore;
use crate::options::ServeOptions;
use crate::ratelimit::RateLimiter;

/// Checks a ModelOrchestra (as JSON) the way the operator will before it applies anything:
/// its warnings, or every error with its field. The operator binary passes its render.
pub type Validator = Arc<dyn Fn(&Value, &str) -> Result<Vec<String>, Vec<InputError>> + Send + Sync>;

/// One Kubernetes client per key user, each sending `Impersonate-User`.
pub(crate) struct Clients {
    base: kube::Config,
    by_user: Mutex<HashMap<String, Client>>,
}

impl Clients {
    fn new(base: kube::Config) -> Clients {
        Clients { base, by_user: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn for_user(&self, user: &str) -> Result<Client, ApiError> {
        let mut by_user = self.by_user.lock().expect("not poisoned");
        if let Some(client) = by_user.get(user) {
            return Ok(client.clone());
        }
        let mut config = self.base.clone();
        config.auth_info.impersonate = Some(user.to_string());
        config.auth_info.impersonate_groups = None;
        let client = Client::try_from(config).map_err(ApiError::from)?;
        by_user.insert(user.to_string(), client.clone());
        Ok(client)
    }

    pub(crate) fn forget_all_but(&self, users: &[String]) {
        self.by_user.lock().expect("not poisoned").retain(|u, _| users.contains(u));
    }
}

pub(crate) struct AppState {
    pub(crate) keys: KeyStore,
    pub(crate) limiter: RateLimiter,
    pub(crate) clients: Clients,
    pub(crate) validator: Validator,
    pub(crate) max_body: usize,
    pub(crate) timeout: Duration,
    pub(crate) secure_cookie: bool,
    pub(crate) cache: ReadCache,
}

impl AppState {
    pub(crate) fn new(keys: KeyStore, config: kube::Config, validator: Validator, options: &ServeOptions) -> AppState {
        AppState {
            keys,
            limiter: RateLimiter::new(options.rate_per_second, options.burst),
            clients: Clients::new(config),
            validator,
            max_body: options.max_body_bytes,
            timeout: options.request_timeout,
            secure_cookie: !options.insecure_listen,
            cache: ReadCache::new(options.read_cache),
        }
    }
}

pub(crate) type Shared = Arc<AppState>;
