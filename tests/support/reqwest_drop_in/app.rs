// Application code written for `reqwest::Client`. `tests/reqwest_drop_in.rs` and
// `tests/reqwest_0_12_drop_in.rs` include it twice each: into a module whose `client()`
// builds a `reqwest::Client`, and into one whose `client()` builds a `RetryClient`. The text
// is the same; only the client's construction differs.

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::time::Duration;

/// What code looks at when a request fails.
#[derive(Debug, PartialEq, Eq)]
pub struct Inspected {
    pub connect: bool,
    pub timeout: bool,
    pub status: Option<reqwest::StatusCode>,
    pub url: Option<String>,
}

/// A JSON POST with a query, headers, a bearer token, a timeout and a version; `?` into
/// `anyhow::Error`, from `send` and from `error_for_status`.
pub async fn create_order(base: &str) -> anyhow::Result<String> {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-tenant", reqwest::header::HeaderValue::from_static("acme"));
    let order = BTreeMap::from([("item", "42"), ("note", "fragile")]);
    let response = client()
        .post(format!("{base}/orders"))
        .query(&[("dry_run", "false")])
        .header("idempotency-key", "order-42")
        .headers(headers)
        .bearer_auth("s3cret")
        .timeout(Duration::from_secs(30))
        .version(reqwest::Version::HTTP_11)
        .json(&order)
        .send()
        .await?
        .error_for_status()?;
    Ok(response.text().await?)
}

/// A form PUT with basic authentication; `?` into `Box<dyn Error + Send + Sync>`.
pub async fn sign_in(base: &str) -> Result<reqwest::StatusCode, Box<dyn StdError + Send + Sync>> {
    let response = client()
        .put(format!("{base}/session"))
        .basic_auth("alice", Some("wonderland"))
        .form(&[("remember", "yes")])
        .send()
        .await?;
    Ok(response.status())
}

/// The other methods: `body`, `patch`, `delete`, `head`, `get`, `request`; a send spawned
/// on the runtime (its future is `Send + 'static`).
pub async fn tidy_up(
    base: &str,
) -> Result<Vec<reqwest::StatusCode>, Box<dyn StdError + Send + Sync>> {
    let client = client();
    let listed = tokio::spawn(client.get(format!("{base}/orders")).send());
    let statuses = vec![
        client
            .patch(format!("{base}/orders/42"))
            .body("note=urgent")
            .send()
            .await?
            .status(),
        client.delete(format!("{base}/orders/41")).send().await?.status(),
        client.head(format!("{base}/orders")).send().await?.status(),
        client
            .request(reqwest::Method::OPTIONS, format!("{base}/orders"))
            .send()
            .await?
            .status(),
        listed.await??.status(),
    ];
    Ok(statuses)
}

/// A GET that fails, inspected as a `reqwest::Error` is.
pub async fn inspect(url: &str, timeout: Duration) -> Inspected {
    match client().get(url).timeout(timeout).send().await {
        Ok(response) => panic!("{url} answered {}", response.status()),
        Err(err) => Inspected {
            connect: err.is_connect(),
            timeout: err.is_timeout(),
            status: err.status(),
            url: err.url().map(|url| url.to_string()),
        },
    }
}

/// A GET whose error goes up with `?` into `anyhow::Error`.
pub async fn fetch(url: &str) -> anyhow::Result<String> {
    Ok(client().get(url).send().await?.text().await?)
}

/// A GET whose error goes up with `?` into `Box<dyn Error + Send + Sync>`.
pub async fn fetch_boxed(url: &str) -> Result<String, Box<dyn StdError + Send + Sync>> {
    Ok(client().get(url).send().await?.text().await?)
}
