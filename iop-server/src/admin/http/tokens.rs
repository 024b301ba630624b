//! The admin tokens in force, replaceable while the API serves: SIGHUP re-reads the
//! token file, a removed token is refused from the next request on, and the event
//! streams opened with it end.

use std::sync::{Arc, PoisonError, RwLock};

use futures_lite::Stream;
use tokio::sync::watch;

use super::access::{AdminTokens, Role};

/// The admin tokens in force, shared by the access rules, the event streams and the
/// reload. Cloning shares them.
#[derive(Debug, Clone)]
pub struct TokenBook {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tokens: RwLock<AdminTokens>,
    /// Bumped on every replacement.
    changed: watch::Sender<u64>,
}

impl TokenBook {
    /// The book of `tokens`.
    pub fn new(tokens: AdminTokens) -> Self {
        Self {
            inner: Arc::new(Inner {
                tokens: RwLock::new(tokens),
                changed: watch::Sender::new(0),
            }),
        }
    }

    /// Puts `tokens` in force: a token no longer listed is refused from now on, and
    /// the event streams opened with it end.
    pub fn replace(&self, tokens: AdminTokens) {
        *self
            .inner
            .tokens
            .write()
            .unwrap_or_else(PoisonError::into_inner) = tokens;
        self.inner.changed.send_modify(|n| *n += 1);
    }

    /// The role of `presented`, if it is a token in force.
    pub fn role_of(&self, presented: &[u8]) -> Option<Role> {
        self.inner
            .tokens
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .role_of(presented)
    }

    /// How many tokens are in force.
    pub fn len(&self) -> usize {
        self.inner
            .tokens
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Never true: a token file lists at least one token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Completes once `token` is no longer in force.
    pub async fn revoked(&self, token: &[u8]) {
        let mut changed = self.inner.changed.subscribe();
        while self.role_of(token).is_some() {
            if changed.changed().await.is_err() {
                // The book is gone with the server: nothing revokes any more.
                std::future::pending::<()>().await;
            }
        }
    }

    /// `stream`, ended once `token` is no longer in force.
    pub fn until_revoked<S>(
        &self,
        stream: S,
        token: Vec<u8>,
    ) -> impl Stream<Item = S::Item> + use<S>
    where
        S: Stream + Send + Unpin + 'static,
    {
        let book = self.clone();
        futures_lite::stream::unfold(Some(stream), move |open| {
            let (book, token) = (book.clone(), token.clone());
            async move {
                let mut stream = open?;
                let next = async { futures_lite::StreamExt::next(&mut stream).await };
                let revoked = async {
                    book.revoked(&token).await;
                    None
                };
                let item = futures_lite::future::or(next, revoked).await?;
                Some((item, Some(stream)))
            }
        })
    }
}
