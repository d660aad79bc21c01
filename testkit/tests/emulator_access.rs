//! What the emulator answers servers that delegate authentication and
//! authorization to it, as kube-apiserver v1.28 answers them: tokens from
//! the TokenRequest subresource, TokenReview of them, SubjectAccessReview
//! decided by ClusterRoles and ClusterRoleBindings.
//!
//! | behaviour                                                      | test                                          |
//! |----------------------------------------------------------------|-----------------------------------------------|
//! | an issued token reviews as its ServiceAccount, with its groups | `an_issued_token_authenticates_its_account`   |
//! | an unknown token is not authenticated, with an error           | `an_unknown_token_is_not_authenticated`       |
//! | deleting the ServiceAccount invalidates its tokens             | `a_deleted_accounts_token_is_refused`         |
//! | no token for a missing ServiceAccount (404)                    | `no_token_for_a_missing_account`              |
//! | a ClusterRoleBinding's nonResourceURLs rule allows `get` only  | `bound_non_resource_urls_are_allowed`         |
//! | resource rules: group, resource and verb must all match        | `resource_rules_match_group_resource_and_verb`|

use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

async fn start() -> (Emulator, kube::Client) {
    let emu = Emulator::start(EmulatorOptions::default())
        .await
        .expect("emulator starts");
    let client = emu.client().expect("client");
    (emu, client)
}

async fn account(client: &kube::Client, name: &str) -> ServiceAccount {
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}}))
            .expect("account");
    Api::<ServiceAccount>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &account)
        .await
        .expect("account created")
}

async fn token(client: &kube::Client, name: &str) -> kube::Result<String> {
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": []}})).expect("token request");
    let issued = Api::<ServiceAccount>::namespaced(client.clone(), "default")
        .create_token_request(name, &PostParams::default(), &request)
        .await?;
    Ok(issued.status.and_then(|s| s.token).unwrap_or_default())
}

async fn review(client: &kube::Client, token: &str) -> TokenReview {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: token.to_owned(),
            audiences: None,
        },
        ..Default::default()
    };
    Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("token review answered")
}

#[tokio::test]
async fn an_issued_token_authenticates_its_account() {
    let (_emu, client) = start().await;
    let created = account(&client, "prometheus").await;
    let token = token(&client, "prometheus").await.expect("token issued");
    let status = review(&client, &token).await.status.expect("status");
    assert_eq!(status.authenticated, Some(true));
    let user = status.user.expect("user");
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:default:prometheus")
    );
    assert_eq!(user.uid, created.metadata.uid);
    assert_eq!(
        user.groups.unwrap_or_default(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ]
    );
}

#[tokio::test]
async fn an_unknown_token_is_not_authenticated() {
    let (_emu, client) = start().await;
    let status = review(&client, "not-a-token").await.status.expect("status");
    assert_ne!(status.authenticated, Some(true));
    assert!(
        status
            .error
            .is_some_and(|e| e.contains("invalid bearer token"))
    );
}

#[tokio::test]
async fn a_deleted_accounts_token_is_refused() {
    let (_emu, client) = start().await;
    account(&client, "gone").await;
    let token = token(&client, "gone").await.expect("token issued");
    Api::<ServiceAccount>::namespaced(client.clone(), "default")
        .delete("gone", &DeleteParams::default())
        .await
        .expect("deleted");
    // Recreated under the same name: another uid, the old token stays refused.
    account(&client, "gone").await;
    let status = review(&client, &token).await.status.expect("status");
    assert_ne!(status.authenticated, Some(true));
}

#[tokio::test]
async fn no_token_for_a_missing_account() {
    let (_emu, client) = start().await;
    match token(&client, "missing").await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 404);
            assert_eq!(status.message, "serviceaccounts \"missing\" not found");
        }
        other => panic!("expected 404, got {other:?}"),
    }
}

async fn bind(client: &kube::Client, role: serde_json::Value, account: &str) {
    let role: ClusterRole = serde_json::from_value(role).expect("role");
    let name = role.metadata.name.clone().unwrap_or_default();
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("role created");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "default"}],
    }))
    .expect("binding");
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding created");
}

async fn allowed(client: &kube::Client, account: &str, spec: SubjectAccessReviewSpec) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:default:{account}")),
            groups: Some(vec!["system:serviceaccounts".into()]),
            ..spec
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("access review answered");
    answer.status.expect("status").allowed
}

fn url(path: &str, verb: &str) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        non_resource_attributes: Some(NonResourceAttributes {
            path: Some(path.into()),
            verb: Some(verb.into()),
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn bound_non_resource_urls_are_allowed() {
    let (_emu, client) = start().await;
    let role = json!({
        "metadata": {"name": "metrics-reader"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    });
    bind(&client, role, "prometheus").await;
    assert!(allowed(&client, "prometheus", url("/metrics", "get")).await);
    assert!(!allowed(&client, "prometheus", url("/metrics", "post")).await);
    assert!(!allowed(&client, "prometheus", url("/debug", "get")).await);
    assert!(!allowed(&client, "other", url("/metrics", "get")).await);
}

#[tokio::test]
async fn resource_rules_match_group_resource_and_verb() {
    let (_emu, client) = start().await;
    let role = json!({
        "metadata": {"name": "reviewer"},
        "rules": [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}],
    });
    bind(&client, role, "operator").await;
    let resource = |group: &str, resource: &str, verb: &str| SubjectAccessReviewSpec {
        resource_attributes: Some(ResourceAttributes {
            group: Some(group.into()),
            resource: Some(resource.into()),
            verb: Some(verb.into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let tokenreviews = resource("authentication.k8s.io", "tokenreviews", "create");
    assert!(allowed(&client, "operator", tokenreviews).await);
    let wrong_verb = resource("authentication.k8s.io", "tokenreviews", "get");
    assert!(!allowed(&client, "operator", wrong_verb).await);
    let wrong_group = resource("", "tokenreviews", "create");
    assert!(!allowed(&client, "operator", wrong_group).await);
}
