//! The studies: one folder per paper, each implementing [`crate::harness::study::Study`].

pub mod fasthla;
pub mod horatio;
pub mod imp;
pub mod in_paper;
pub mod meatballs;
