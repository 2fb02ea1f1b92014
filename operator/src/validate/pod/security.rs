//! The container's and the pod's security contexts: user and group ids, privilege,
//! sysctls, and the seccomp and AppArmor profiles.

use k8s_openapi::api::core::v1::{AppArmorProfile, PodSecurityContext, SeccompProfile, SecurityContext};

use super::{err, one_of};
use crate::error::InputError;
use crate::validate::field_path::FieldPath;

pub(super) fn security_context(c: &SecurityContext, field: &FieldPath) -> Result<(), InputError> {
    ids(c.run_as_user, c.run_as_group, field)?;
    if c.privileged == Some(true) && c.allow_privilege_escalation == Some(false) {
        return err(field.field("allowPrivilegeEscalation"), "cannot be false when privileged is true");
    }
    let sys_admin = c
        .capabilities
        .as_ref()
        .and_then(|caps| caps.add.as_ref())
        .is_some_and(|add| add.iter().any(|c| c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN"));
    if sys_admin && c.allow_privilege_escalation == Some(false) {
        return err(field.field("allowPrivilegeEscalation"), "cannot be false when the SYS_ADMIN capability is added");
    }
    if let Some(p) = c.proc_mount.as_deref() {
        one_of(p, &["Default", "Unmasked"], &field.field("procMount"))?;
    }
    profiles(c.seccomp_profile.as_ref(), c.app_armor_profile.as_ref(), field)
}

pub(super) fn pod_security_context(c: &PodSecurityContext, field: &FieldPath) -> Result<(), InputError> {
    ids(c.run_as_user, c.run_as_group, field)?;
    if c.fs_group.is_some_and(|id| id < 0) {
        return err(field.field("fsGroup"), "must not be negative");
    }
    for (i, g) in c.supplemental_groups.iter().flatten().enumerate() {
        if *g < 0 {
            return err(field.field("supplementalGroups").index(i), "must not be negative");
        }
    }
    if let Some(p) = c.fs_group_change_policy.as_deref() {
        one_of(p, &["OnRootMismatch", "Always"], &field.field("fsGroupChangePolicy"))?;
    }
    for (i, s) in c.sysctls.iter().flatten().enumerate() {
        let valid = !s.name.is_empty()
            && s.name.split(['.', '/']).all(|p| {
                !p.is_empty()
                    && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
            });
        if !valid {
            return err(field.field("sysctls").index(i).field("name"), format!("`{}` is not a sysctl name", s.name));
        }
    }
    profiles(c.seccomp_profile.as_ref(), c.app_armor_profile.as_ref(), field)
}

fn ids(user: Option<i64>, group: Option<i64>, field: &FieldPath) -> Result<(), InputError> {
    for (name, id) in [("runAsUser", user), ("runAsGroup", group)] {
        if id.is_some_and(|id| !(0..=2147483647).contains(&id)) {
            return err(field.field(name), "must be between 0 and 2147483647");
        }
    }
    Ok(())
}

/// Both contexts' seccomp and AppArmor profiles.
fn profiles(
    seccomp: Option<&SeccompProfile>,
    app_armor: Option<&AppArmorProfile>,
    field: &FieldPath,
) -> Result<(), InputError> {
    profile(seccomp.map(|p| (p.type_.as_str(), p.localhost_profile.as_deref())), &field.field("seccompProfile"))?;
    profile(app_armor.map(|p| (p.type_.as_str(), p.localhost_profile.as_deref())), &field.field("appArmorProfile"))
}

/// A seccomp or AppArmor profile: its type, and a localhost profile exactly for `Localhost`.
fn profile(p: Option<(&str, Option<&str>)>, field: &FieldPath) -> Result<(), InputError> {
    let Some((type_, local)) = p else { return Ok(()) };
    one_of(type_, &["RuntimeDefault", "Unconfined", "Localhost"], &field.field("type"))?;
    match (type_ == "Localhost", local.is_some_and(|l| !l.is_empty())) {
        (true, false) => err(field.field("localhostProfile"), "must be set when type is Localhost"),
        (false, true) => err(field.field("localhostProfile"), "can only be set when type is Localhost"),
        _ => Ok(()),
    }
}
