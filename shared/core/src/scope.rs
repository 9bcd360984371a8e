//! Tenant isolation: which rows a read may return.

use crate::TenantId;

/// Whose rows a read may return: one tenant's (anything a tenant names), or every tenant's
/// (operators, and the internal paths that follow a queue message). A row outside the scope
/// reads exactly like a missing one, so another tenant's ids answer as unknown ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    Tenant(&'a TenantId),
    Operator,
}

impl<'a> Scope<'a> {
    /// `Some(tenant)`: that tenant's; `None`: every tenant's.
    pub fn of(tenant: Option<&'a TenantId>) -> Self {
        tenant.map_or(Self::Operator, Self::Tenant)
    }

    /// Whether a row owned by `owner` is in scope.
    pub fn sees(&self, owner: &TenantId) -> bool {
        match self {
            Self::Tenant(t) => *t == owner,
            Self::Operator => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_sees_only_its_own_rows_and_operators_see_all() {
        let (a, b) = (TenantId::generate(), TenantId::generate());
        assert!(Scope::Tenant(&a).sees(&a));
        assert!(!Scope::Tenant(&a).sees(&b));
        assert!(Scope::Operator.sees(&b));
        assert_eq!(Scope::of(Some(&a)), Scope::Tenant(&a));
        assert_eq!(Scope::of(None), Scope::Operator);
    }
}
