use super::*;

fn probe(stub: &InventoryStub, timeout: Duration) -> InventoryProbe {
    InventoryProbe::new(&InventoryConfig {
        base_url: format!("{}/", stub.url()),
        http: HttpSettings {
            timeout: Some(timeout),
            ..HttpSettings::default()
        },
    })
    .unwrap()
}

#[tokio::test]
async fn inventory_answers_online_offline_and_unknown() {
    let stub = InventoryStub::start().await.unwrap();
    stub.set_online("web-1", true);
    stub.set_online("db:2", false);
    let probe = probe(&stub, Duration::from_secs(1));
    assert!(probe.check("web-1").await.unwrap());
    assert!(!probe.check("db:2").await.unwrap());
    let err = probe.check("nope").await.unwrap_err();
    assert!(!err.is_retryable(), "{err}");
    assert!(err.to_string().contains("/assets/nope"), "{err}");
    assert_eq!(stub.asset_calls(), 3);
    // An id that is not one plain segment is refused before any request.
    for id in ["db 2", "..", "a/b"] {
        assert!(!probe.check(id).await.unwrap_err().is_retryable(), "{id}");
    }
    assert_eq!(stub.asset_calls(), 3);

    stub.faults().always(Fault::WrongShape);
    assert!(!probe.check("web-1").await.unwrap_err().is_retryable());
    stub.faults().always(Fault::Hang);
    let err = probe.check("web-1").await.unwrap_err();
    assert!(
        err.is_retryable() && err.to_string().contains("timed out"),
        "{err}"
    );
}
