//! The two questions the API server answers for every new caller: who is
//! this token (TokenReview), and may that user `get` this path
//! (SubjectAccessReview on a non-resource URL), as kube-apiserver itself
//! delegates them for its aggregated servers.

use super::cache::Decision;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

/// A review the API server did not answer.
#[derive(Debug, thiserror::Error)]
#[error("{review} failed: {source}")]
pub struct ReviewError {
    review: &'static str,
    #[source]
    source: kube::Error,
}

/// Asks the API server about `token` for `verb` on `path`.
pub async fn decide(
    client: &kube::Client,
    token: &str,
    path: &str,
    verb: &str,
) -> Result<Decision, ReviewError> {
    let Some(user) = authenticate(client, token).await? else {
        return Ok(Decision::Unauthenticated);
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username,
            groups: user.groups,
            uid: user.uid,
            extra: user.extra,
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_owned()),
                verb: Some(verb.to_owned()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = ask(client, "SubjectAccessReview", &review).await?;
    let allowed = answer
        .status
        .is_some_and(|s| s.allowed && s.denied != Some(true));
    Ok(if allowed {
        Decision::Allowed
    } else {
        Decision::Forbidden
    })
}

/// The user a token belongs to, or `None` when the API server does not
/// authenticate it.
async fn authenticate(client: &kube::Client, token: &str) -> Result<Option<UserInfo>, ReviewError> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: token.to_owned(),
            audiences: None,
        },
        ..Default::default()
    };
    let answer = ask(client, "TokenReview", &review).await?;
    Ok(answer
        .status
        .filter(|s| s.authenticated == Some(true))
        .and_then(|s| s.user))
}

/// Creates a review (it is never stored: the API server answers in the
/// object it returns).
async fn ask<K>(client: &kube::Client, review: &'static str, question: &K) -> Result<K, ReviewError>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
    K::DynamicType: Default,
{
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), question)
        .await
        .map_err(|source| ReviewError { review, source })
}
