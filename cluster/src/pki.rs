//! The cluster's certificates and keys, made fresh per cluster: a CA, serving certificates
//! (the API server's for 127.0.0.1, localhost, the node's address and the `kubernetes`
//! Service; a real node's kubelet's), client certificates for the admin, the control-plane
//! and node components (their identity is the certificate's CN and O), and the
//! ServiceAccount token signing key.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

use crate::Error;

/// A certificate and its key, as PEM.
#[derive(Clone)]
pub struct CertPem {
    pub cert: String,
    pub key: String,
}

/// Everything the control plane needs, written under `dir`.
pub struct Pki {
    pub ca: CertPem,
    pub dir: PathBuf,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

fn pki_error(what: &str, e: rcgen::Error) -> Error {
    Error::Pki(format!("{what}: {e}"))
}

impl Pki {
    /// A new CA; the signing key for ServiceAccount tokens is written as `sa.key`/`sa.pub`.
    pub fn create(dir: &Path) -> Result<Pki, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = name("local-cluster-ca", None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().map_err(|e| pki_error("CA key", e))?;
        let key_pem = key.serialize_pem();
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(|e| pki_error("CA certificate", e))?;
        let ca = CertPem { cert: issuer.pem(), key: key_pem };
        let pki = Pki { ca, dir: dir.to_path_buf(), issuer };
        pki.write("ca.crt", &pki.ca.cert)?;
        pki.write("ca.key", &pki.ca.key)?;
        let sa = KeyPair::generate().map_err(|e| pki_error("ServiceAccount key", e))?;
        pki.write("sa.key", &sa.serialize_pem())?;
        pki.write("sa.pub", &sa.public_key_pem())?;
        Ok(pki)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn write(&self, file: &str, text: &str) -> Result<PathBuf, Error> {
        let path = self.path(file);
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        Ok(path)
    }

    /// A serving certificate for 127.0.0.1 and localhost, written as `<stem>.crt/.key`.
    pub fn serving(&self, stem: &str) -> Result<CertPem, Error> {
        self.serving_for(stem, &[], &[])
    }

    /// A serving certificate for 127.0.0.1, localhost and the given names and addresses.
    pub fn serving_for(&self, stem: &str, dns_names: &[&str], ips: &[IpAddr]) -> Result<CertPem, Error> {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(stem, None);
        params.subject_alt_names = vec![
            SanType::DnsName("localhost".try_into().expect("a valid DNS name")),
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ];
        for dns in dns_names {
            let dns = (*dns).try_into().map_err(|e| pki_error(stem, e))?;
            params.subject_alt_names.push(SanType::DnsName(dns));
        }
        params.subject_alt_names.extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(stem, params)
    }

    /// A client certificate: the API server reads the user from CN and the groups from O.
    pub fn client(&self, stem: &str, user: &str, group: Option<&str>) -> Result<CertPem, Error> {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(user, group);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(stem, params)
    }

    fn issue(&self, stem: &str, params: CertificateParams) -> Result<CertPem, Error> {
        let key = KeyPair::generate().map_err(|e| pki_error(stem, e))?;
        let cert = params.signed_by(&key, &self.issuer).map_err(|e| pki_error(stem, e))?;
        let pem = CertPem { cert: cert.pem(), key: key.serialize_pem() };
        self.write(&format!("{stem}.crt"), &pem.cert)?;
        self.write(&format!("{stem}.key"), &pem.key)?;
        Ok(pem)
    }
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(o) = organization {
        dn.push(DnType::OrganizationName, o);
    }
    dn
}
