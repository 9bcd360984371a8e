//! Certificates for the tests' TLS peers (a private broker, a receiver that asks for a
//! client certificate): a CA made here, and the certificates it signs, in PEM.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// A certificate and its private key (PKCS #8), in PEM.
#[derive(Debug, Clone)]
pub struct Pair {
    pub cert: String,
    pub key: String,
}

/// A CA of the tests.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

fn e(e: rcgen::Error) -> String {
    format!("certificates: {e}")
}

impl Ca {
    pub fn new(name: &str) -> Result<Self, String> {
        let mut p = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(p, KeyPair::generate().map_err(e)?).map_err(e)?;
        Ok(Self { issuer })
    }

    /// The CA's certificate.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `host`.
    pub fn server(&self, host: &str) -> Result<Pair, String> {
        self.sign(
            vec![host.to_owned()],
            host,
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate named `name`.
    pub fn client(&self, name: &str) -> Result<Pair, String> {
        self.sign(Vec::new(), name, ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn sign(
        &self,
        sans: Vec<String>,
        cn: &str,
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<Pair, String> {
        let key = KeyPair::generate().map_err(e)?;
        let mut p = CertificateParams::new(sans).map_err(e)?;
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![usage];
        let cert = p.signed_by(&key, &self.issuer).map_err(e)?;
        Ok(Pair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}
