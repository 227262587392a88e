<?php
/**
 * action=wikiwebreadcheck: may a named user read each of the given pages?
 *
 * The answer is MediaWiki's own: PermissionManager::userCan( 'read' ), so
 * core group rights, $wgWhitelistRead, a private wiki and every extension's
 * getUserPermissionsErrors / userCan hooks (Lockdown and the like) count.
 * A redirect is readable only if its target is readable too. A name that is
 * not a registered account is checked as an anonymous reader.
 *
 * Instead of a name, the caller may give an e-mail address: the one account
 * that holds it confirmed (user_email_authenticated set; anyone may type any
 * address into their preferences) is checked. The address is compared as
 * MediaWiki stores it, the domain part case-insensitively. No account: an
 * anonymous reader. Two or more: "several", every page unreadable, and the
 * accounts are never named.
 *
 * Only callers holding the right wikiweb-readcheck may ask. Read-only;
 * nothing cached: the address is looked up at every request.
 *
 * Uses only interfaces present from MediaWiki 1.39 to the current release:
 * MediaWikiServices, PermissionManager, TitleFactory, RedirectLookup,
 * UserFactory, ParamValidator, and the database's SelectQueryBuilder for the
 * address (MediaWiki has no service that finds accounts by address). No
 * hooks are registered.
 *
 * @license MIT
 */

namespace MediaWiki\Extension\WikiwebReadCheck;

use MediaWiki\MediaWikiServices;
use Wikimedia\ParamValidator\ParamValidator;
use Wikimedia\ParamValidator\TypeDef\StringDef;

// ApiBase moved into the MediaWiki\Api namespace in 1.43 (the old name is an alias).
if ( !class_exists( 'MediaWiki\\Extension\\WikiwebReadCheck\\ReadCheckApiBase', false ) ) {
	if ( class_exists( 'MediaWiki\\Api\\ApiBase' ) ) {
		class_alias( 'MediaWiki\\Api\\ApiBase', 'MediaWiki\\Extension\\WikiwebReadCheck\\ReadCheckApiBase' );
	} else {
		class_alias( 'ApiBase', 'MediaWiki\\Extension\\WikiwebReadCheck\\ReadCheckApiBase' );
	}
}

class ApiReadCheck extends ReadCheckApiBase {

	/** How many titles one request may name (MediaWiki's usual multi-value limit). */
	private const TITLES_MAX = 50;

	/** The longest address looked up: MediaWiki's user_email is a TINYTEXT. */
	private const EMAIL_MAX = 255;

	/** Accounts whose address shares the local part, looked at at most. */
	private const CANDIDATES_MAX = 500;

	public function execute() {
		$this->checkUserRightsAny( 'wikiweb-readcheck' );
		$params = $this->extractRequestParams();
		$services = MediaWikiServices::getInstance();
		$userFactory = $services->getUserFactory();
		$titleFactory = $services->getTitleFactory();
		$permissions = $services->getPermissionManager();
		$redirects = $services->getRedirectLookup();

		$this->requireMaxOneParameter( $params, 'user', 'email' );

		// No name, an invalid or an unknown one (not an account, an IP
		// address) is an anonymous reader: never more than anonymous
		// readers may read.
		$user = null;
		$accounts = null;
		if ( $params['email'] !== null ) {
			[ $accounts, $id ] = $this->findByEmail( (string)$params['email'] );
			if ( $accounts === 'one' ) {
				$user = $userFactory->newFromId( $id );
			}
		} else {
			$name = (string)$params['user'];
			$user = $name === '' ? null : $userFactory->newFromName( $name );
		}
		$anonymous = !$user || !$user->isRegistered();
		if ( $anonymous ) {
			$user = $userFactory->newAnonymous();
		}

		$pages = [];
		foreach ( $params['titles'] as $text ) {
			$entry = [ 'title' => $text ];
			$title = $titleFactory->newFromText( $text );
			if ( !$title || $title->isExternal() || !$title->canExist() ) {
				// Nothing that can be read as a page: never readable.
				$entry['invalid'] = true;
				$entry['readable'] = false;
				$pages[] = $entry;
				continue;
			}
			// An address of several accounts: nobody's permissions.
			$readable = $accounts !== 'several' && $permissions->userCan( 'read', $user, $title );
			if ( $readable && $title->exists() ) {
				$target = $redirects->getRedirectTarget( $title );
				if ( $target ) {
					$targetTitle = $titleFactory->castFromLinkTarget( $target );
					$entry['target'] = $targetTitle ? $targetTitle->getPrefixedText() : '';
					// A target elsewhere (interwiki) or beyond a page is not read.
					$readable = $targetTitle && !$targetTitle->isExternal() && $targetTitle->canExist()
						&& $permissions->userCan( 'read', $user, $targetTitle );
				}
			}
			$entry['normalized'] = $title->getPrefixedText();
			$entry['readable'] = $readable;
			$pages[] = $entry;
		}

		$answer = [
			'user' => $anonymous ? '' : $user->getName(),
			'anonymous' => $anonymous,
		];
		if ( $accounts !== null ) {
			$answer['email'] = $accounts;
		}
		$answer['pages'] = $pages;
		$this->getResult()->addValue( null, $this->getModuleName(), $answer );
	}

	/**
	 * The accounts that hold $email confirmed: [ 'none', 0 ], [ 'one', user id ]
	 * or [ 'several', 0 ]. The local part is compared exactly, the domain
	 * case-insensitively (the database's LIKE only narrows the candidates:
	 * its case rules differ between backends).
	 */
	private function findByEmail( string $email ): array {
		$at = strrpos( $email, '@' );
		if ( $at === false || $at === 0 || $at === strlen( $email ) - 1 ) {
			return [ 'none', 0 ];
		}
		$local = substr( $email, 0, $at );
		$domain = mb_strtolower( substr( $email, $at + 1 ), 'UTF-8' );
		$dbr = $this->getReplica();
		$rows = $dbr->newSelectQueryBuilder()
			->select( [ 'user_id', 'user_email' ] )
			->from( 'user' )
			->where( 'user_email' . $dbr->buildLike( $local . '@', $dbr->anyString() ) )
			->andWhere( 'user_email_authenticated IS NOT NULL' )
			->limit( self::CANDIDATES_MAX + 1 )
			->caller( __METHOD__ )
			->fetchResultSet();
		$ids = [];
		$n = 0;
		foreach ( $rows as $row ) {
			$n++;
			$stored = (string)$row->user_email;
			$sat = strrpos( $stored, '@' );
			if ( $sat === false || substr( $stored, 0, $sat ) !== $local
				|| mb_strtolower( substr( $stored, $sat + 1 ), 'UTF-8' ) !== $domain
			) {
				continue;
			}
			$ids[] = (int)$row->user_id;
		}
		if ( $n > self::CANDIDATES_MAX || count( $ids ) > 1 ) {
			// Too many to tell apart is as ambiguous as two.
			return [ 'several', 0 ];
		}
		return $ids ? [ 'one', $ids[0] ] : [ 'none', 0 ];
	}

	/** A replica connection: IConnectionProvider since 1.42, the load balancer before. */
	private function getReplica() {
		$services = MediaWikiServices::getInstance();
		if ( method_exists( $services, 'getConnectionProvider' ) ) {
			return $services->getConnectionProvider()->getReplicaDatabase();
		}
		return $services->getDBLoadBalancer()->getConnection( DB_REPLICA );
	}

	public function isReadMode() {
		return true;
	}

	public function getAllowedParams() {
		return [
			'user' => [
				ParamValidator::PARAM_TYPE => 'string',
			],
			'email' => [
				ParamValidator::PARAM_TYPE => 'string',
				StringDef::PARAM_MAX_BYTES => self::EMAIL_MAX,
			],
			'titles' => [
				ParamValidator::PARAM_TYPE => 'string',
				ParamValidator::PARAM_REQUIRED => true,
				ParamValidator::PARAM_ISMULTI => true,
				ParamValidator::PARAM_ISMULTI_LIMIT1 => self::TITLES_MAX,
				ParamValidator::PARAM_ISMULTI_LIMIT2 => self::TITLES_MAX,
			],
		];
	}

	protected function getExamplesMessages() {
		return [
			'action=wikiwebreadcheck&user=Alice&titles=Main%20Page|Payroll:Salaries'
				=> 'apihelp-wikiwebreadcheck-example-simple',
			'action=wikiwebreadcheck&email=alice@example.org&titles=Main%20Page'
				=> 'apihelp-wikiwebreadcheck-example-email',
		];
	}

	public function getHelpUrls() {
		return 'https://github.com/wikiweb/wikiweb/blob/main/docs/API.md';
	}
}
