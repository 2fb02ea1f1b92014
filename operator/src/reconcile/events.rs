//! Which Events a status change announces. An Event when the Ready condition's reason or
//! message changes (a transition or a new failure), and when `Degraded` becomes true for a
//! reason of its own (warnings about the spec, a stuck rollout); one per application that
//! falls asleep, begins waking or wakes. Not on every reconcile, and not for pods still
//! coming up (`ApplicationsNotReady`) or for the cluster or the operator catching up with a
//! new CRD (`WaitingForAPIServer`, `StartingWatches`): the status shows that progress, and an
//! Event per step of it was a request per CR for nothing a user acts on.

use model_orchestra_api::v1alpha2::{ModelOrchestraStatus, SleepPhase};

use super::condition::{ConditionType, Reason};
use super::status;

/// One Event to publish on the CR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Notice {
    /// A Warning Event (else Normal).
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

/// The Events the change from `previous` to `next` announces, in order.
pub(crate) fn notices(previous: &ModelOrchestraStatus, next: &ModelOrchestraStatus) -> Vec<Notice> {
    let of = |s: &ModelOrchestraStatus, t: ConditionType| {
        status::condition(s, t).map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    let degraded = of(next, ConditionType::Degraded).filter(|(status, ..)| status == "True");
    let mut notices = Vec::new();
    if let Some((ready, reason, message)) = of(next, ConditionType::Ready)
        .filter(|r| of(previous, ConditionType::Ready).as_ref() != Some(r))
        .filter(|(_, reason, _)| {
            ![Reason::ApplicationsNotReady, Reason::WaitingForApiServer, Reason::StartingWatches]
                .iter()
                .any(|r| reason == r.as_str())
        })
    {
        // Ready is good news even while warnings about the spec keep Degraded (they have an
        // Event of their own).
        notices.push(Notice { warning: degraded.is_some() && ready != "True", reason, message });
    }
    if let Some((_, reason, message)) = degraded.filter(|d| of(previous, ConditionType::Degraded).as_ref() != Some(d)) {
        if !notices.iter().any(|n| n.reason == reason && n.message == message) {
            notices.push(Notice { warning: true, reason, message });
        }
    }
    notices.extend(sleep_notices(previous, next));
    notices
}

/// A Normal Event per application that fell asleep, began waking, or woke (with how long
/// the wake-up took).
fn sleep_notices(previous: &ModelOrchestraStatus, next: &ModelOrchestraStatus) -> Vec<Notice> {
    let mut notices = Vec::new();
    for (app, now) in &next.applications {
        let before = previous.applications.get(app);
        let (Some(phase), Some(was)) = (now.sleep, before.and_then(|b| b.sleep)) else { continue };
        let took = || {
            let since = before.and_then(|b| b.sleep_since.as_ref())?;
            let at = now.sleep_since.as_ref()?;
            Some(at.0.duration_since(since.0).as_secs_f64())
        };
        let (reason, message) = match (was, phase) {
            (SleepPhase::Awake, SleepPhase::Sleeping) => {
                ("Sleeping", format!("{app}: idle, scaled to zero by the model gateway; the next request wakes it"))
            }
            (SleepPhase::Sleeping, SleepPhase::Waking) => {
                ("Waking", format!("{app}: a request woke it; the model gateway holds requests until it serves"))
            }
            (SleepPhase::Waking, SleepPhase::Awake) => (
                "Woke",
                match took() {
                    Some(s) => format!("{app}: serving {s:.1} s after the wake-up began"),
                    None => format!("{app}: serving"),
                },
            ),
            (SleepPhase::Sleeping, SleepPhase::Awake) => ("Woke", format!("{app}: serving")),
            _ => continue,
        };
        notices.push(Notice { warning: false, reason: reason.to_string(), message });
    }
    notices
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;
    use model_orchestra_api::v1alpha2::ApplicationStatus;

    fn condition(type_: ConditionType, status: &str, reason: Reason, message: &str) -> Condition {
        Condition {
            type_: type_.as_str().into(),
            status: status.into(),
            reason: reason.as_str().into(),
            message: message.into(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: Some(1),
        }
    }

    fn with(conditions: Vec<Condition>) -> ModelOrchestraStatus {
        ModelOrchestraStatus { conditions, ..Default::default() }
    }

    fn sleeping(phase: SleepPhase, at: i64) -> ModelOrchestraStatus {
        let app = ApplicationStatus {
            sleep: Some(phase),
            sleep_since: Some(Time(Timestamp::from_second(at).unwrap())),
            ..Default::default()
        };
        ModelOrchestraStatus { applications: [("chat".to_string(), app)].into(), ..Default::default() }
    }

    #[test]
    fn becoming_ready_is_announced_once() {
        let ready = with(vec![condition(ConditionType::Ready, "True", Reason::Ready, "all ready")]);
        let announced = notices(&ModelOrchestraStatus::default(), &ready);
        assert_eq!(announced, [Notice { warning: false, reason: "Ready".into(), message: "all ready".into() }]);
        assert_eq!(notices(&ready, &ready), []);
    }

    #[test]
    fn pods_still_coming_up_are_not_announced() {
        let progress = with(vec![condition(ConditionType::Ready, "False", Reason::ApplicationsNotReady, "0/1")]);
        assert_eq!(notices(&ModelOrchestraStatus::default(), &progress), []);
    }

    #[test]
    fn the_api_server_catching_up_with_a_new_crd_is_not_announced() {
        let waiting = with(vec![
            condition(ConditionType::Ready, "False", Reason::WaitingForApiServer, "waiting for the API server"),
            condition(ConditionType::Degraded, "False", Reason::AsExpected, ""),
        ]);
        assert_eq!(notices(&ModelOrchestraStatus::default(), &waiting), []);
    }

    #[test]
    fn ready_with_spec_warnings_is_normal_and_the_warnings_are_a_warning_of_their_own() {
        let next = with(vec![
            condition(ConditionType::Ready, "True", Reason::Ready, "all ready"),
            condition(ConditionType::Degraded, "True", Reason::SpecWarnings, "spec.x: insecure"),
        ]);
        let announced = notices(&ModelOrchestraStatus::default(), &next);
        assert_eq!(
            announced.iter().map(|n| (n.warning, n.reason.as_str())).collect::<Vec<_>>(),
            [(false, "Ready"), (true, "SpecWarnings")]
        );
    }

    #[test]
    fn a_failure_that_is_both_ready_and_degraded_is_announced_once_as_a_warning() {
        let failed = [ConditionType::Ready, ConditionType::Degraded].map(|t| {
            condition(t, if t == ConditionType::Ready { "False" } else { "True" }, Reason::Invalid, "refused")
        });
        let announced = notices(&ModelOrchestraStatus::default(), &with(failed.to_vec()));
        assert_eq!(announced, [Notice { warning: true, reason: "Invalid".into(), message: "refused".into() }]);
    }

    #[test]
    fn falling_asleep_and_waking_are_announced_with_the_seconds_the_wake_up_took() {
        let (awake, asleep) = (sleeping(SleepPhase::Awake, 0), sleeping(SleepPhase::Sleeping, 10));
        let (waking, woken) = (sleeping(SleepPhase::Waking, 20), sleeping(SleepPhase::Awake, 26));
        let reasons = |a, b| notices(a, b).into_iter().map(|n| (n.reason, n.message)).collect::<Vec<_>>();
        assert_eq!(reasons(&awake, &asleep)[0].0, "Sleeping");
        assert_eq!(reasons(&asleep, &waking)[0].0, "Waking");
        assert_eq!(
            reasons(&waking, &woken),
            [("Woke".to_string(), "chat: serving 6.0 s after the wake-up began".to_string())]
        );
    }

    #[test]
    fn an_application_that_never_slept_is_not_announced() {
        let awake = sleeping(SleepPhase::Awake, 0);
        assert_eq!(notices(&ModelOrchestraStatus::default(), &awake), []);
    }
}
