//! One certificate order, RFC 8555 through instant-acme: the account (kept, or made and kept),
//! a new order for the domains, each authorization answered by the configured challenge, the
//! CSR for a fresh key (rcgen), and the chain.

use std::sync::Arc;
use std::time::Duration;

use instant_acme::{
    Account, AuthorizationStatus, ChallengeType, Identifier, NewAccount, NewOrder, OrderStatus,
    RetryPolicy,
};

use super::answers::Answers;
use super::store::{Files, StoredAccount};
use crate::config::tls::{AcmeConfig, Challenge};

/// How long the authority may take to validate and to issue.
const POLL: RetryPolicy = RetryPolicy::new()
    .initial_delay(Duration::from_millis(250))
    .backoff(1.5)
    .timeout(Duration::from_secs(90));

/// A certificate chain and its key, both PEM.
pub struct Issued {
    /// The chain, leaf first.
    pub chain: String,
    /// The key of the leaf.
    pub key: String,
}

/// Orders a certificate for `cfg.domains`, answering challenges through `answers`.
pub async fn order(
    cfg: &AcmeConfig,
    files: &Files,
    answers: &Arc<Answers>,
) -> Result<Issued, String> {
    let account = account(cfg, files).await?;
    let identifiers: Vec<Identifier> = cfg
        .domains
        .iter()
        .map(|d| Identifier::Dns(d.clone()))
        .collect();
    let mut order = account
        .new_order(&NewOrder::new(&identifiers))
        .await
        .map_err(|e| fail("new order", &e))?;
    let kind = match cfg.challenge {
        Challenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
        Challenge::Http01 => ChallengeType::Http01,
    };
    let result = async {
        let mut authorizations = order.authorizations();
        while let Some(authz) = authorizations.next().await {
            let mut authz = authz.map_err(|e| fail("authorization", &e))?;
            match authz.status {
                AuthorizationStatus::Valid => continue,
                AuthorizationStatus::Pending => {}
                other => return Err(format!("authorization is {other:?}")),
            }
            let mut challenge = authz
                .challenge(kind.clone())
                .ok_or_else(|| format!("the authority offers no {kind:?} challenge"))?;
            let answer = challenge.key_authorization();
            match cfg.challenge {
                Challenge::TlsAlpn01 => {
                    let domain = challenge.identifier().to_string();
                    answers.open_alpn(&domain, answer.digest().as_ref())?;
                }
                Challenge::Http01 => answers.open_http(&challenge.token, answer.as_str()),
            }
            challenge
                .set_ready()
                .await
                .map_err(|e| fail("challenge", &e))?;
        }
        let status = order
            .poll_ready(&POLL)
            .await
            .map_err(|e| fail("validation", &e))?;
        if status != OrderStatus::Ready {
            return Err(format!("the order is {status:?}, not ready"));
        }
        Ok(())
    }
    .await;
    answers.close_challenges();
    result?;
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let mut params =
        rcgen::CertificateParams::new(cfg.domains.clone()).map_err(|e| e.to_string())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    let csr = params.serialize_request(&key).map_err(|e| e.to_string())?;
    order
        .finalize_csr(csr.der())
        .await
        .map_err(|e| fail("finalize", &e))?;
    let chain = order
        .poll_certificate(&POLL)
        .await
        .map_err(|e| fail("certificate", &e))?;
    Ok(Issued {
        chain,
        key: key.serialize_pem(),
    })
}

/// The account kept for this directory, or a new one (kept at once, 0600).
async fn account(cfg: &AcmeConfig, files: &Files) -> Result<Account, String> {
    let http = || -> Result<Box<super::http::Client>, String> {
        Ok(Box::new(super::http::Client::new(
            cfg.directory_ca.as_deref(),
        )?))
    };
    if let Some(credentials) = files.account(&cfg.directory) {
        return Account::builder_with_http(http()?)
            .from_credentials(credentials)
            .await
            .map_err(|e| fail("account", &e));
    }
    let contact = cfg.email.as_ref().map(|e| format!("mailto:{e}"));
    let contacts: Vec<&str> = contact.iter().map(String::as_str).collect();
    let (account, credentials) = Account::builder_with_http(http()?)
        .create(
            &NewAccount {
                contact: &contacts,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            cfg.directory.clone(),
            None,
        )
        .await
        .map_err(|e| fail(&format!("new account at {}", cfg.directory), &e))?;
    files.save_account(&StoredAccount {
        directory: cfg.directory.clone(),
        credentials,
    })?;
    tracing::info!(directory = %cfg.directory, "ACME account made");
    Ok(account)
}

/// `what` failed, and why.
fn fail(what: &str, e: &instant_acme::Error) -> String {
    format!("{what}: {}", crate::text::error_chain(e))
}
