//! Apply, roll back and prune one CR's plan: dry runs where the admission facts ask for
//! them, server-side applies several at once (RoleBindings after their Roles), the
//! creations of a refused attempt deleted again, and what the render no longer produces
//! deleted only once every apply succeeded.

use futures::stream::{self, StreamExt};
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::Api;
use serde_json::Value;

use super::applied::{AppliedState, Planned};
use super::context::Context;
use super::cr::Cr;
use super::error::{ReconcileError, Step};
use crate::reconcile::admission::{self, Facts};
use crate::reconcile::gates::Held;
use crate::reconcile::plan::{self, ApplyPlan, PlannedObject, FIELD_MANAGER};
use model_orchestra_api::kinds::Kind;

/// Objects of one CR applied (or dry-run) at once.
const APPLY_CONCURRENCY: usize = 8;

/// Server-side applies one object (as a dry run, or for real).
async fn apply_one(
    ctx: &Context,
    namespace: &str,
    o: &PlannedObject,
    step: Step,
) -> Result<DynamicObject, ReconcileError> {
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &o.kind.resource());
    let params = PatchParams { dry_run: step == Step::DryRun, ..PatchParams::apply(FIELD_MANAGER).force() };
    api.patch(&o.name, &params, &Patch::Apply(&o.body)).await.map_err(|e| ReconcileError::request(step, o, e))
}

/// What one reconcile does with one planned object.
#[derive(Debug, Clone)]
pub(super) struct Decision {
    pub(super) step: admission::Step,
    /// It exists (cached, or applied by an earlier reconcile).
    pub(super) exists: bool,
    /// What the last apply left, for an object it left unchanged.
    pub(super) kept: Option<Planned>,
}

/// Decides, per object, whether it needs a dry run, only the apply, or nothing.
pub(super) fn decide(ctx: &Context, cr: &Cr, plan: &ApplyPlan, admission: admission::Admission) -> Vec<Decision> {
    ctx.memory.read(&cr.key, |e| decide_from(ctx, cr, plan, admission, e.and_then(|e| e.applied.as_ref())))
}

fn decide_from(
    ctx: &Context,
    cr: &Cr,
    plan: &ApplyPlan,
    admission: admission::Admission,
    last: Option<&AppliedState>,
) -> Vec<Decision> {
    let last = last.filter(|s| s.uid == cr.uid);
    plan.objects
        .iter()
        .map(|o| {
            let live = ctx.caches.version(o.kind, &cr.namespace, &o.name);
            let before = last.and_then(|s| s.objects.iter().find(|p| p.kind == o.kind && p.name == o.name));
            let unchanged = before
                .is_some_and(|p| p.digest.as_ref() == Some(&o.digest) && p.version.is_some() && p.version == live);
            let facts = Facts {
                exists: live.is_some() || before.is_some(),
                unchanged,
                admission,
                kind_admitted: ctx.permissions.allows(&cr.namespace, o.kind),
            };
            let step = admission::step(facts);
            let kept = (step == admission::Step::Skip).then(|| before.cloned()).flatten();
            Decision { step, exists: facts.exists, kept }
        })
        .collect()
}

/// Sends the objects `which` of the plan, several at once, as `step` (dry run or real);
/// every answer, in plan order.
async fn send(
    ctx: &Context,
    cr: &Cr<'_>,
    plan: &ApplyPlan,
    which: Vec<usize>,
    step: Step,
) -> Vec<(usize, Result<DynamicObject, ReconcileError>)> {
    // Indices, not references, go through the stream: its futures must be `Send` for any
    // lifetime the controller picks.
    stream::iter(which)
        .map(|i| async move { (i, apply_one(ctx, &cr.namespace, &plan.objects[i], step).await) })
        .buffered(APPLY_CONCURRENCY)
        .collect()
        .await
}

fn indices(decisions: &[Decision], pick: impl Fn(&Decision) -> bool) -> Vec<usize> {
    decisions.iter().enumerate().filter(|(_, d)| pick(d)).map(|(i, _)| i).collect()
}

/// `which` split in two: the objects but RoleBindings of a Role the plan applies, and those
/// RoleBindings. The API server lets the operator bind a Role only once it can read the
/// Role (to check it holds its permissions), so they are applied after it, and not dry-run
/// (the dry run of the Role creates nothing to read).
fn bindings_last(plan: &ApplyPlan, which: Vec<usize>) -> (Vec<usize>, Vec<usize>) {
    let roles: Vec<&str> = plan.objects.iter().filter(|o| o.kind == Kind::Role).map(|o| o.name.as_str()).collect();
    which.into_iter().partition(|&i| {
        let o = &plan.objects[i];
        let binds = o.body.pointer("/roleRef/kind").and_then(Value::as_str) == Some("Role")
            && o.body.pointer("/roleRef/name").and_then(Value::as_str).is_some_and(|r| roles.contains(&r));
        !(o.kind == Kind::RoleBinding && binds)
    })
}

/// The objects that could be refused, server-side applied as a dry run: any refusal
/// (schema, admission policy, RBAC) means nothing at all is written.
pub(super) async fn dry_run(
    ctx: &Context,
    cr: &Cr<'_>,
    plan: &ApplyPlan,
    decisions: &[Decision],
) -> Result<(), ReconcileError> {
    let (which, _) = bindings_last(plan, indices(decisions, |d| d.step == admission::Step::DryRunThenApply));
    for (_, answer) in send(ctx, cr, plan, which.clone(), Step::DryRun).await {
        answer?;
    }
    let created = which.into_iter().filter(|&i| !decisions[i].exists).map(|i| plan.objects[i].kind);
    ctx.permissions.learn(&cr.namespace, created);
    Ok(())
}

/// Server-side applies every object that is not as the last apply left it; returns what
/// the server answered (none for an object left alone), in plan order.
///
/// The creations applied without a dry run go first, alone: if one is refused (by what no
/// watch shows: another controller's object of the same name, a permission revoked), the
/// others just created are deleted again, nothing else has been written, and the next
/// attempt dry-runs every object of the namespace.
pub(super) async fn apply(
    ctx: &Context,
    cr: &Cr<'_>,
    plan: &ApplyPlan,
    decisions: &[Decision],
) -> Result<Vec<Option<DynamicObject>>, ReconcileError> {
    let mut applied: Vec<Option<DynamicObject>> = vec![None; plan.objects.len()];
    let (unverified, unverified_bindings) =
        bindings_last(plan, indices(decisions, |d| d.step == admission::Step::Apply));
    let mut refused = None;
    for wave in [unverified, unverified_bindings] {
        for (i, answer) in send(ctx, cr, plan, wave, Step::Apply).await {
            match answer {
                Ok(o) => applied[i] = Some(o),
                Err(e) => refused = refused.or(Some(e)),
            }
        }
        if refused.is_some() {
            break;
        }
    }
    if let Some(e) = refused {
        ctx.permissions.distrust(&cr.namespace);
        roll_back(ctx, cr, plan, &applied).await;
        // The dry run of everything names the refusal as it would have named it first.
        let (all, _) = bindings_last(plan, (0..plan.objects.len()).collect());
        for (_, answer) in send(ctx, cr, plan, all, Step::DryRun).await {
            answer?;
        }
        return Err(e);
    }
    let created = applied.iter().zip(&plan.objects).filter(|(a, _)| a.is_some()).map(|(_, o)| o.kind);
    ctx.permissions.learn(&cr.namespace, created);
    let (verified, verified_bindings) =
        bindings_last(plan, indices(decisions, |d| d.step == admission::Step::DryRunThenApply));
    for wave in [verified, verified_bindings] {
        for (i, answer) in send(ctx, cr, plan, wave, Step::Apply).await {
            applied[i] = Some(answer?);
        }
    }
    ctx.metrics.count_applied(applied.iter().flatten().count());
    Ok(applied)
}

/// Deletes the objects `created` holds (each only if it is still the one created).
async fn roll_back(ctx: &Context, cr: &Cr<'_>, plan: &ApplyPlan, created: &[Option<DynamicObject>]) {
    for (o, created) in plan.objects.iter().zip(created) {
        let Some(created) = created else { continue };
        match delete_if_same(ctx, &cr.namespace, o.kind, &o.name, created.metadata.uid.clone()).await {
            Ok(_) => tracing::info!(modelorchestra = %cr.key, kind = o.kind.kind(), name = %o.name, "rolled back"),
            Err(e) => {
                tracing::warn!(modelorchestra = %cr.key, kind = o.kind.kind(), name = %o.name, error = %e, "cannot roll back")
            }
        }
    }
}

/// Deletes what this CR's previous renders produced and this one does not (see
/// [`plan::prune`] for what may be deleted).
pub(super) async fn prune(
    ctx: &Context,
    cr: &Cr<'_>,
    plan: &ApplyPlan,
    held: &[Held],
) -> Result<usize, ReconcileError> {
    let owner = cr.owner(ctx.settings.line.serves.api_version());
    let mut pruned = 0;
    let children = ctx.caches.children(&cr.namespace, &cr.name);
    let existing: Vec<_> = children.iter().map(|c| c.existing.clone()).collect();
    let kept = |e: &&plan::Existing| !held.iter().any(|h| h.kind == e.kind && h.name == e.name);
    for gone in plan::prune(&owner, plan, &existing).into_iter().filter(kept) {
        let uid = children.iter().find(|c| c.existing == *gone).and_then(|c| c.uid.clone());
        match delete_if_same(ctx, &cr.namespace, gone.kind, &gone.name, uid).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(source) => {
                return Err(ReconcileError::Request {
                    step: Step::Prune,
                    kind: gone.kind.kind(),
                    name: gone.name.clone(),
                    source,
                })
            }
        }
        ctx.metrics.count_pruned(1);
        pruned += 1;
        tracing::info!(modelorchestra = %cr.key, kind = gone.kind.kind(), name = %gone.name, "pruned");
    }
    Ok(pruned)
}

/// Deletes an object (its dependents in the background) if it is still the one with `uid`:
/// a same-named object created since is not the one deleted.
async fn delete_if_same(
    ctx: &Context,
    namespace: &str,
    kind: Kind,
    name: &str,
    uid: Option<String>,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &kind.resource());
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions { uid, resource_version: None }),
        ..Default::default()
    };
    api.delete(name, &params).await.map(drop)
}
